package ops_test

import (
	"context"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/ops"
)

func TestNulls(t *testing.T) {
	b := batchOf(
		i64col("id", []int64{0, 1, 2, 3}, nil),
		f32col("x", []float32{1, 0, 3, 0}, []byte{1, 0, 1, 0}),
		i64col("c", []int64{5, 6, 0, 8}, []byte{1, 1, 0, 1}),
		strcol("q", []string{"a", "", "c", "d"}, []byte{1, 0, 1, 1}),
		listcol("s", [][]int64{{1}, nil, {2, 3}, {}}, []byte{1, 0, 1, 1}),
	)
	t.Run("fill", func(t *testing.T) {
		p := compile(t, b, "", "- nulls: {policy: fill, fill: -1}")
		out := run(t, p, b)
		if got := floats(t, out, "x"); !slices.Equal(got, []float64{1, -1, 3, -1}) {
			t.Errorf("x %v", got)
		}
		if got := ints(t, out, "c"); !slices.Equal(got, []int64{5, 6, -1, 8}) {
			t.Errorf("c %v", got)
		}
		if got := strs(t, out, "q"); !slices.Equal(got, []string{"a", "", "c", "d"}) {
			t.Errorf("q %q", got)
		}
		for _, f := range p.Output() {
			if f.Nullable {
				t.Errorf("%s still nullable", f.Name)
			}
		}
	})
	t.Run("fill 0 of some columns", func(t *testing.T) {
		p := compile(t, b, "", "- nulls: {policy: fill, columns: [c, s]}")
		out := run(t, p, b)
		if got := ints(t, out, "c"); !slices.Equal(got, []int64{5, 6, 0, 8}) {
			t.Errorf("c %v", got)
		}
		if valid(t, out, "c") != nil || valid(t, out, "x") == nil {
			t.Error("validity")
		}
		if o := p.Output(); o[1].Nullable != true || o[2].Nullable || o[4].Nullable {
			t.Errorf("output %+v", o)
		}
	})
	t.Run("skip", func(t *testing.T) {
		p := compile(t, b, "", "- nulls: {policy: skip, columns: [c, q]}")
		if got := ints(t, run(t, p, b), "id"); !slices.Equal(got, []int64{0, 3}) {
			t.Errorf("kept %v", got)
		}
		if len(p.Early()) != 0 || !p.ApplyDrops() {
			t.Errorf("skip of late columns runs early: %v", p.Early())
		}
		p = compile(t, b, "", "- nulls: {policy: skip}")
		if got := ints(t, run(t, p, b), "id"); !slices.Equal(got, []int64{0}) {
			t.Errorf("kept %v", got)
		}
		// Early when a filter reads the column anyway.
		p = compile(t, b, "", `- filter: "id < 3 and fill_null(c, 1) > 0"`, "- nulls: {policy: skip, columns: [c]}")
		if got := p.Early(); !slices.Equal(got, []string{"id", "c"}) || p.ApplyDrops() {
			t.Errorf("early %v, Apply drops %v", got, p.ApplyDrops())
		}
		if got := ints(t, run(t, p, b), "id"); !slices.Equal(got, []int64{0, 1}) {
			t.Errorf("kept %v", got)
		}
	})
	t.Run("error", func(t *testing.T) {
		p := compile(t, b, "", "- nulls: {policy: error, columns: [id, c]}")
		_, err := runErr(p, p.NewState(), b)
		wantErr(t, err, `pipeline[0].nulls (line 6): column "c": a row is null, and nulls: error forbids it`)
		// Only rows that reach the output count.
		p = compile(t, b, "", "- nulls: {policy: error, columns: [c]}", `- filter: "id != 2"`)
		if got := ints(t, run(t, p, b), "id"); !slices.Equal(got, []int64{0, 1, 3}) {
			t.Errorf("kept %v", got)
		}
		p = compile(t, b, "", "- nulls: {policy: error, columns: [c]}", "- nulls: {policy: skip, columns: [q]}", `- filter: "id != 1"`)
		_, err = runErr(p, p.NewState(), b)
		wantErr(t, err, `column "c": a row is null`)
	})
	t.Run("expressions after skip see no nulls", func(t *testing.T) {
		p := compile(t, b, "", "- nulls: {policy: skip, columns: [c]}", `- map: {d: "c * 2"}`)
		out := run(t, p, b)
		if got := ints(t, out, "d"); !slices.Equal(got, []int64{10, 12, 16}) {
			t.Errorf("d %v", got)
		}
		if o := p.Output(); o[len(o)-1].Nullable {
			t.Errorf("d nullable")
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct{ op, want string }{
			{"- nulls: {policy: fill, fill: 0.5, columns: [c]}", `pipeline[0].nulls.fill: column "c": fill 0.5 for an integer (int64) column`},
			{"- nulls: {policy: skip, columns: [cc]}", `pipeline[0].nulls.columns: unknown column "cc" (did you mean "c"?)`},
			{"- nulls: {policy: skip, columns: [c, c]}", `column "c" listed twice`},
		} {
			_, err := ops.Compile(context.Background(), job(t, "", tc.op), fieldsOf(b), ops.Env{})
			wantErr(t, err, tc.want)
		}
	})
}
