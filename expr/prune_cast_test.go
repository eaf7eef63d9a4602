package expr_test

import (
	"math"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/expr"
)

// MayMatch must never rule out a row group that has a matching row
// ("sound for any input"). cast(int, float32) rounds above 2^24, so the
// integer statistics do not bound the float32 values exactly.
func TestMayMatchCastFloat32(t *testing.T) {
	b := batch(
		ints("a", column.Int64, []int64{16777217}, nil),
		ints("i", column.Int32, []int64{16777217}, nil),
	)
	stats := map[string]expr.Range{
		"a": {Min: 16777217, Max: 16777217, HasBounds: true, Rows: 1},
		"i": {Min: 16777217, Max: 16777217, HasBounds: true, Rows: 1},
	}
	lookup := func(c string) (expr.Range, bool) { r, ok := stats[c]; return r, ok }
	for _, src := range []string{
		"cast(a, float32) == 16777216",
		"cast(i, float32) == 16777216",
		"cast(i, float32) <= 16777216",
		"cast(a, float32) in (16777216)",
		"cast(i, float32) < 16777216.5",
	} {
		e, err := expr.Compile(src, expr.BatchSchema(b))
		if err != nil {
			t.Fatal(err)
		}
		sel, err := e.Filter(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(sel) == 1 && !e.MayMatch(lookup) {
			t.Errorf("%s: row matches, but MayMatch says the row group cannot", src)
		}
	}
	_ = math.Pi
}
