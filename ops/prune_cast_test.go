package ops_test

import (
	"testing"

	"github.com/lastmile/lastmile/expr"
)

// A filter after an op that changes a column must not be pruned by the
// input column's statistics.
func TestPruneAfterOps(t *testing.T) {
	b := batchOf(
		i64col("a", []int64{1, 2}, []byte{1, 1}),
		i64col("b", []int64{100, 200}, nil),
		i64col("n", []int64{0, 0}, []byte{0, 0}),
		f32col("x", []float32{1.5, 2.5}, nil),
	)
	stats := map[string]expr.Range{
		"a": {Min: 1, Max: 2, HasBounds: true, NullCount: 0, Rows: 2},
		"b": {Min: 100, Max: 200, HasBounds: true, NullCount: 0, Rows: 2},
		"n": {NullCount: 2, Rows: 2},
		"x": {Min: 1.5, Max: 2.5, HasBounds: true, NullCount: 0, Rows: 2},
	}
	lookup := func(c string) (expr.Range, bool) { r, ok := stats[c]; return r, ok }
	cases := [][]string{
		{`- map: {a: "a * 100"}`, `- filter: "a > 150"`},
		{"- rename: {a: b, b: a}", `- filter: "a > 150"`},
		{"- nulls: {policy: fill, columns: [n], fill: -1}", `- filter: "n == -1"`},
		{"- cast: {x: int32}", `- filter: "x == 2"`},
		{`- map: {a: "b"}`, `- filter: "a >= 100"`},
		{`- map: {z: "a"}`, "- drop: [a]", "- rename: {b: a}", `- filter: "a >= 100"`},
	}
	for _, c := range cases {
		p := compile(t, b, "", c...)
		if !p.Prune(lookup) {
			t.Errorf("%v: pruned a row group whose rows pass", c)
		}
		if out := run(t, p, b); out.Rows == 0 {
			t.Errorf("%v: no row passes (test wrong)", c)
		}
	}
}

// Through a pipeline: a filter over cast(int, float32) must not skip a
// row group (or page) holding a row that passes.
func TestPruneCastFloat32(t *testing.T) {
	b := batchOf(i64col("id", []int64{16777217}, nil))
	lookup := func(c string) (expr.Range, bool) {
		return expr.Range{Min: 16777217, Max: 16777217, HasBounds: true, Rows: 1}, c == "id"
	}
	p := compile(t, b, "", `- filter: "cast(id, float32) == 16777216"`)
	if run(t, p, b).Rows != 1 {
		t.Fatal("the row should pass")
	}
	if !p.Prune(lookup) {
		t.Error("Prune rules out a row group whose row passes the filter")
	}
}
