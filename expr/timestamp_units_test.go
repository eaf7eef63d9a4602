package expr_test

import (
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/expr"
)

// A timestamp() without a unit compared with a timestamp column counts
// the column's unit (docs/expressions.md), so a time that fits an int64
// of microseconds (or days) but not of nanoseconds — a 9999-12-31
// "forever" sentinel, a 1600 lower bound — must compile against a
// microsecond or DATE column and mean what it says.
func TestTimestampBeyondNanosOnCoarserColumn(t *testing.T) {
	sch := expr.Schema{
		{Name: "us", Type: typ(expr.Int64, false), Unit: 1000},
		{Name: "day", Type: typ(expr.Int32, false), Unit: 86400e9},
	}
	// 9999-12-31 in us: 253402214400000000; 1600-01-01: -11676096000000000.
	b := batch(
		ints("us", column.Int64, []int64{253402214400000000 - 1, 253402214400000000, -11676096000000000 - 1, -11676096000000000}, nil),
		ints("day", column.Int32, []int64{2932895, 2932896, -135141, -135140}, nil),
	)
	checkUnits(t, b, sch, []unitCase{
		{src: `us < timestamp("9999-12-31")`, want: []int64{1, 0, 1, 1}},
		{src: `timestamp("9999-12-31") > us`, want: []int64{1, 0, 1, 1}},
		{src: `us >= timestamp("1600-01-01")`, want: []int64{1, 1, 0, 1}},
		{src: `us < timestamp("9999-12-30T23:59:59.9999995Z")`, want: []int64{1, 0, 1, 1}}, // rounded up to the next microsecond
		{src: `us <= timestamp("9999-12-30T23:59:59.9999995Z")`, want: []int64{1, 0, 1, 1}},
		{src: `us in (timestamp("9999-12-31"))`, want: []int64{0, 1, 0, 0}},
		{src: `day < timestamp("9999-12-31")`, want: []int64{1, 0, 1, 1}},
		{src: `day >= timestamp("1600-01-01T12:00:00Z")`, want: []int64{1, 1, 0, 0}}, // days from 1600-01-02
	})
	// Anywhere else a timestamp() counts nanoseconds, and one that does
	// not fit them stays an error.
	for _, src := range []string{`us < timestamp("9999-12-31") + 1`, `timestamp("9999-12-31") > 0`} {
		if _, err := expr.Compile(src, sch); err == nil {
			t.Errorf("Compile(%q): no error", src)
		}
	}
}

// Expr.Unit is the unit a map's column computed by the expression
// counts: a copy of timestamps of one unit counts it, a value computed
// from them otherwise is of UnknownUnit, anything else of none.
func TestExprUnitOfTimestampCopies(t *testing.T) {
	sch := expr.Schema{
		{Name: "us", Type: typ(expr.Int64, true), Unit: 1000},
		{Name: "us2", Type: typ(expr.Int64, false), Unit: 1000},
		{Name: "ms", Type: typ(expr.Int64, false), Unit: 1e6},
		{Name: "day", Type: typ(expr.Int32, false), Unit: 86400e9},
		{Name: "n", Type: typ(expr.Int64, false)},
		{Name: "b", Type: typ(expr.Bool, false)},
	}
	for _, tc := range []struct {
		src  string
		want int64
	}{
		{"us", 1000},
		{"if(b, us, us2)", 1000},
		{"if(b, us, null)", 1000},
		{"if(b, us, 0)", 1000},
		{`fill_null(us, timestamp("2025-11-20"))`, 1000},
		{"min(us, us2, 0)", 1000},
		{`clip(us, timestamp("2025-01-01"), timestamp("2026-01-01"))`, 1000},
		{"cast(us, float64)", 1000},
		{"cast(day, int64)", 86400e9},
		{"day", 86400e9},
		{`timestamp("2025-11-20", "ms")`, 1e6},
		{`if(b, timestamp("2025-11-20", "ms"), timestamp("2025-11-21", "ms"))`, 1e6},
		{"us + 1", expr.UnknownUnit},
		{"us - us2", expr.UnknownUnit},
		{`us - timestamp("2025-11-20")`, expr.UnknownUnit},
		{"if(b, us, ms * 1000)", expr.UnknownUnit},
		{"fill_null(us, n)", expr.UnknownUnit},
		{"cast(us, int32)", expr.UnknownUnit},
		{"log(cast(us, float64))", expr.UnknownUnit},
		{"n", 0},
		{"n + 1", 0},
		{`fill_null(n, timestamp("2025-11-20"))`, 0},
		{"bucketize(us, [0])", 0},
		{"us >= 0", 0},
	} {
		e, err := expr.Compile(tc.src, sch)
		if err != nil {
			t.Errorf("Compile(%q): %v", tc.src, err)
			continue
		}
		if got := e.Unit(); got != tc.want {
			t.Errorf("%s: Unit() = %d, want %d", tc.src, got, tc.want)
		}
	}
	// An instant that meets a timestamp in arithmetic counts its unit:
	// us - timestamp("1970-01-01T00:00:01Z") subtracts a million.
	b := batch(ints("us", column.Int64, []int64{5e6}, nil))
	e, err := expr.Compile(`us - timestamp("1970-01-01T00:00:01Z")`, sch)
	if err != nil {
		t.Fatal(err)
	}
	out := &column.Column{}
	if err := e.Eval(b, out); err != nil {
		t.Fatal(err)
	}
	if got := out.Int64s()[0]; got != 4e6 {
		t.Errorf("us - timestamp(1s) = %d, want 4000000", got)
	}
}

// A timestamp() plus or minus a whole number is still an instant (in
// nanoseconds, or the unit given): compared with a timestamp column it
// counts the column's unit, as timestamp() alone does. Anything else
// computed from one — a product, a float, the difference of two — is of
// no known unit, and comparing it with a timestamp column is an error
// rather than counts of two units compared.
func TestTimestampArithmeticAgainstColumn(t *testing.T) {
	day := int64(86400e6)
	t0 := int64(1763596800e6) // 2025-11-20 in us
	sch := timeSchema()
	b := batch(
		ints("us", column.Int64, []int64{t0 - day, t0, t0 + day}, nil),
		ints("ms", column.Int64, []int64{(t0 - day) / 1000, t0 / 1000, (t0 + day) / 1000}, nil),
		ints("day", column.Int32, []int64{20411, 20412, 20413}, nil),
		ints("n", column.Int64, []int64{0, 1, 2}, nil),
	)
	checkUnits(t, b, sch, []unitCase{
		{src: `us >= timestamp("2025-11-20") - 86400000000000`, want: []int64{1, 1, 1}},
		{src: `us >= timestamp("2025-11-20") + 1`, want: []int64{0, 0, 1}}, // a nanosecond after: the next microsecond
		{src: `us < 1 + timestamp("2025-11-20")`, want: []int64{1, 1, 0}},
		{src: `us >= timestamp("2025-11-20", "us") + 86400000000`, want: []int64{0, 0, 1}},
		{src: `ms > timestamp("2025-11-21") - 1`, want: []int64{0, 0, 1}},
		{src: `day >= date("2025-11-20") + 1`, want: []int64{0, 0, 1}},
		{src: `n < timestamp("1970-01-01") + 2`, want: []int64{1, 1, 0}}, // a column of no unit: nanoseconds, as before
	})
	for _, src := range []string{
		`us >= timestamp("2025-11-20") * 2`,
		`us >= timestamp("2025-11-20") - 86400e9`,
		`us >= timestamp("2025-11-21") - timestamp("2025-11-20")`,
		`ms >= timestamp("2025-11-20", "us") + 1`,
		`us - ms >= timestamp("2025-11-21") - timestamp("2025-11-20")`,
	} {
		if _, err := expr.Compile(src, sch); err == nil {
			t.Errorf("Compile(%q): no error", src)
		}
	}
}

// Two timestamps of different units compared with each other (a
// microsecond column with a millisecond one, a timestamp with a DATE) is
// an error naming both units: their counts are not comparable. Of one
// unit, or where one's unit is not known (ms * 1000), they compare.
func TestTimestampsOfTwoUnitsCompared(t *testing.T) {
	sch := timeSchema()
	for _, src := range []string{"us >= ms", "ms < us", "fill_null(us, us2) == ms", "us > day", "us in (ms)"} {
		_, err := expr.Compile(src, sch)
		if err == nil {
			t.Errorf("Compile(%q): no error", src)
			continue
		}
		if src != "us in (ms)" && !strings.Contains(err.Error(), "microseconds") {
			t.Errorf("Compile(%q): %v, want one naming microseconds", src, err)
		}
	}
	for _, src := range []string{"us >= us2", "ms * 1000 >= us", "us >= n", "max(us, us2) > us"} {
		if _, err := expr.Compile(src, sch); err != nil {
			t.Errorf("Compile(%q): %v", src, err)
		}
	}
}

// timeSchema is columns of timestamps in microseconds (us, us2) and
// milliseconds (ms), a DATE (day), and a plain integer (n).
func timeSchema() expr.Schema {
	return expr.Schema{
		{Name: "us", Type: typ(expr.Int64, false), Unit: 1000},
		{Name: "us2", Type: typ(expr.Int64, false), Unit: 1000},
		{Name: "ms", Type: typ(expr.Int64, false), Unit: 1e6},
		{Name: "day", Type: typ(expr.Int32, false), Unit: 86400e9},
		{Name: "n", Type: typ(expr.Int64, false)},
	}
}
