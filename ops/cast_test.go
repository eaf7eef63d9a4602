package ops_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/ops"
)

func bf16s(c *column.Column) []float32 {
	var out []float32
	for i := 0; i+1 < len(c.Data); i += 2 {
		out = append(out, math.Float32frombits(uint32(c.Data[i])<<16|uint32(c.Data[i+1])<<24))
	}
	return out
}

func TestCast(t *testing.T) {
	b := batchOf(
		i64col("id", []int64{1, -2, 3, 1 << 40}, nil),
		f32col("x", []float32{1.9, -2.5, float32(math.NaN()), 3e9}, nil),
		i32col("l", []int32{1, 0, 1, 0}, []byte{1, 1, 0, 1}),
		listcol("s", [][]int64{{1, 2}, {}, {3}, {1 << 40}}, nil),
	)
	t.Run("scalars as cast()", func(t *testing.T) {
		p := compile(t, b, "", "- cast: {id: int32, x: int64, l: float32}")
		out := run(t, p, b)
		if got := ints(t, out, "id"); !slices.Equal(got, []int64{1, -2, 3, 0}) {
			t.Errorf("id %v (int64 → int32 wraps)", got)
		}
		if got := ints(t, out, "x"); !slices.Equal(got, []int64{1, -2, 0, 3000000000}) {
			t.Errorf("x %v", got)
		}
		if got := valid(t, out, "x"); !slices.Equal(got, []byte{1, 1, 0, 1}) {
			t.Errorf("x validity %v (NaN is null)", got)
		}
		if got := floats(t, out, "l"); !slices.Equal(got, []float64{1, 0, 0, 0}) {
			t.Errorf("l %v", got)
		}
		o := p.Output()
		if o[0].DType != column.Int32 || o[1].DType != column.Int64 || !o[1].Nullable || o[2].DType != column.Float32 || !o[2].Nullable {
			t.Errorf("output %+v", o)
		}
	})
	t.Run("bfloat16 rounds to nearest even", func(t *testing.T) {
		// 1 + 2^-8 is halfway between two bfloat16s: ties to even (1);
		// 1 + 3·2^-8 rounds up to 1 + 2^-6.
		b := batchOf(f32col("x", []float32{1 + 1.0/256, 1 + 3.0/256, -0.5}, nil))
		p := compile(t, b, "", "- cast: {x: bfloat16}")
		out := run(t, p, b)
		if got := bf16s(col(t, out, "x")); !slices.Equal(got, []float32{1, 1 + 1.0/64, -0.5}) {
			t.Errorf("bf16 %v", got)
		}
	})
	t.Run("lists element by element", func(t *testing.T) {
		p := compile(t, b, "", "- cast: {s: int32}", "- sequence: {column: s, length: 2}")
		out := run(t, p, b)
		c := col(t, out, "s")
		if c.DType != column.Int32 || c.Width != 2 {
			t.Fatalf("s is %v width %d", c.DType, c.Width)
		}
		if got := ints(t, out, "s"); !slices.Equal(got, []int64{1, 2, 0, 0, 3, 0, 0, 0}) {
			t.Errorf("s %v", got)
		}
		p = compile(t, b, "", "- cast: {s: bfloat16}")
		out = run(t, p, b)
		if got := bf16s(col(t, out, "s")); !slices.Equal(got, []float32{1, 2, 3, 1 << 40}) {
			t.Errorf("s %v", got)
		}
	})
	t.Run("float lists that do not fit", func(t *testing.T) {
		b := batchOf(column.Column{Name: "f", Kind: column.List, DType: column.Float64, Width: 1, Len: 1, Offsets: []int64{0, 1},
			Data: []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f}}) // NaN
		p := compile(t, b, "", "- cast: {f: int64}")
		_, err := runErr(p, p.NewState(), b)
		wantErr(t, err, `column "f": element NaN does not fit int64`)
	})
	t.Run("errors", func(t *testing.T) {
		b := batchOf(strcol("q", []string{"a"}, nil), i64col("id", []int64{1}, nil))
		for _, tc := range []struct{ op, want string }{
			{"- cast: {q: int64}", `6: pipeline[0].cast.q: column "q" is string; cast converts numbers`},
			{"- cast: {idd: int64}", `pipeline[0].cast.idd: unknown column "idd" (did you mean "id"?)`},
		} {
			_, err := ops.Compile(context.Background(), job(t, "", tc.op), fieldsOf(b), ops.Env{})
			wantErr(t, err, tc.want)
		}
	})
}
