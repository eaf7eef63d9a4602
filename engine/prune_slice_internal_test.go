package engine

import (
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/expr"
)

// A unit that is a slice of a row group (MaxUnitRows) carries the row
// group's statistics, null count included: 950 nulls in a group of 1000
// rows say nothing about how many of a 100-row slice are null. Pruning must
// not read them as "every row of the slice is null" and rule out a slice
// that may hold the group's 50 values.
func TestSlicedUnitGroupNullCount(t *testing.T) {
	plan := &decode.Plan{Fields: []decode.Field{{Name: "x", Kind: column.Fixed, DType: column.Int64, Nullable: true}}}
	u := &decode.Unit{RowStart: 900, Rows: 100, GroupRowCount: 1000,
		Bounds: []decode.Bounds{{Known: true, Int: true, MinInt: 5, MaxInt: 5, Nulls: 950}}}
	sch := expr.Schema{{Name: "x", Type: expr.Type{Kind: expr.Int64, Nullable: true}}}
	for _, src := range []string{"x == 5", "not is_null(x)", "x > 0"} {
		e, err := expr.Compile(src, sch)
		if err != nil {
			t.Fatal(err)
		}
		if !e.MayMatch(unitStats(plan, u)) {
			t.Errorf("%s: the slice is ruled out, though the group's 50 values of 5 may lie in it", src)
		}
	}
}
