package ops_test

import (
	"math"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/expr"
)

func TestMap(t *testing.T) {
	b := batchOf(
		i64col("id", []int64{1, 2, 3, 4}, nil),
		i32col("label", []int32{1, 0, 1, 0}, []byte{1, 1, 0, 1}),
		f32col("x", []float32{-1, 0.5, 2, 100}, nil),
		strcol("q", []string{"a", "bb", "", "dddd"}, nil),
	)
	t.Run("adds and replaces", func(t *testing.T) {
		p := compile(t, b, "", `- map: {x: "clip(x, 0, 10)", h: "hash_mod(id, 7)", n: "len(q)"}`)
		out := run(t, p, b)
		if got := names(out); !slices.Equal(got, []string{"id", "label", "x", "q", "h", "n"}) {
			t.Errorf("columns %v", got)
		}
		if got := floats(t, out, "x"); !slices.Equal(got, []float64{0, 0.5, 2, 10}) {
			t.Errorf("x %v", got)
		}
		var want []int64
		for _, id := range []int64{1, 2, 3, 4} {
			want = append(want, int64(expr.HashInt(id)%7))
		}
		if got := ints(t, out, "h"); !slices.Equal(got, want) {
			t.Errorf("h %v, want %v", got, want)
		}
		if got := ints(t, out, "n"); !slices.Equal(got, []int64{1, 2, 0, 4}) {
			t.Errorf("n %v", got)
		}
	})
	t.Run("entries see the columns before the map", func(t *testing.T) {
		p := compile(t, b, "", `- map: {id: "id * 10", y: "id + 1"}`)
		out := run(t, p, b)
		if got := ints(t, out, "y"); !slices.Equal(got, []int64{2, 3, 4, 5}) {
			t.Errorf("y %v", got)
		}
		if got := ints(t, out, "id"); !slices.Equal(got, []int64{10, 20, 30, 40}) {
			t.Errorf("id %v", got)
		}
	})
	t.Run("a later map sees the new column", func(t *testing.T) {
		p := compile(t, b, "", `- map: {id: "id * 10"}`, `- map: {y: "id + 1"}`)
		out := run(t, p, b)
		if got := ints(t, out, "y"); !slices.Equal(got, []int64{11, 21, 31, 41}) {
			t.Errorf("y %v", got)
		}
	})
	t.Run("nulls propagate", func(t *testing.T) {
		p := compile(t, b, "", `- map: {l: "cast(label, float32)", f: "fill_null(label, -1)"}`)
		out := run(t, p, b)
		if got := valid(t, out, "l"); !slices.Equal(got, []byte{1, 1, 0, 1}) {
			t.Errorf("l validity %v", got)
		}
		if got := ints(t, out, "f"); !slices.Equal(got, []int64{1, 0, -1, 0}) {
			t.Errorf("f %v", got)
		}
		if p.Output()[4].Nullable != true || p.Output()[5].Nullable != false {
			t.Errorf("output %+v", p.Output())
		}
	})
	t.Run("bfloat16", func(t *testing.T) {
		p := compile(t, b, "", `- map: {x: "cast(x, bfloat16)"}`)
		out := run(t, p, b)
		c := col(t, out, "x")
		if c.DType != column.BFloat16 {
			t.Fatalf("dtype %v", c.DType)
		}
		h := c.Data
		for i, want := range []float32{-1, 0.5, 2, 100} {
			got := math.Float32frombits(uint32(h[2*i])<<16 | uint32(h[2*i+1])<<24)
			if got != want {
				t.Errorf("row %d: %v, want %v", i, got, want)
			}
		}
	})
	t.Run("dead maps are not computed", func(t *testing.T) {
		p := compile(t, b, "", `- map: {y: "x * 2"}`, `- drop: [y, x]`)
		if got := p.Needs(); !slices.Equal(got, []string{"id", "label", "q"}) {
			t.Errorf("needs %v", got)
		}
	})
}
