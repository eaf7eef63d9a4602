package expr_test

import (
	"testing"

	"github.com/lastmile/lastmile/expr"
)

// TestTimestampPlusColumnKeepsItsUnit: a timestamp() or date() plus or
// minus an integer column is an instant still, counted as the constant
// counts (nanoseconds without a unit), as it is plus a whole-number
// literal: compared with a timestamp column of another unit it is a
// compile error, not a comparison of microseconds with nanoseconds
// that no row passes. Before, the sum had no unit, and
// us >= timestamp("2025-11-20") + n compiled and compared 1.7e15 with
// 1.7e18.
func TestTimestampPlusColumnKeepsItsUnit(t *testing.T) {
	sch := expr.Schema{
		{Name: "us", Type: typ(expr.Int64, false), Unit: 1000},
		{Name: "ns", Type: typ(expr.Int64, false), Unit: 1},
		{Name: "day", Type: typ(expr.Int32, false), Unit: 86400e9},
		{Name: "n", Type: typ(expr.Int64, false)},
		{Name: "k", Type: typ(expr.Int32, false)},
	}
	for _, src := range []string{
		`us >= timestamp("2025-11-20") + n`,
		`us >= n + timestamp("2025-11-20")`,
		`us < timestamp("2025-11-20") - n`,
		`us >= timestamp("2025-11-20", "ms") + n`,
		`day >= timestamp("2025-11-20") + n`,
	} {
		if _, err := expr.Compile(src, sch); err == nil {
			t.Errorf("Compile(%q): no error; want one naming both units", src)
		}
	}
	for _, c := range []struct {
		src  string
		unit int64
	}{
		{`ns >= timestamp("2025-11-20") + n`, 0},
		{`us >= timestamp("2025-11-20", "us") + n`, 0},
		{`day >= date("2025-11-20") + k`, 0},
		{`timestamp("2025-11-20") + n`, 1},
		{`timestamp("2025-11-20", "us") - n`, 1000},
		{`date("2025-11-20") + k`, 86400e9},
	} {
		e, err := expr.Compile(c.src, sch)
		if err != nil {
			t.Errorf("Compile(%q): %v", c.src, err)
			continue
		}
		if e.Unit() != c.unit {
			t.Errorf("%s: Unit() = %d, want %d", c.src, e.Unit(), c.unit)
		}
	}
}

// TestTimestampTimesColumnRefused: a timestamp() or date() multiplied,
// divided or taken modulo by an integer column counts no one unit, and
// compared with a timestamp column is a compile error, as the same with
// a literal is; before, us >= timestamp("2025-11-20") * n compiled. A
// value computed from columns alone (ms * 1000) is taken at its word.
func TestTimestampTimesColumnRefused(t *testing.T) {
	sch := timeSchema()
	for _, src := range []string{
		`us >= timestamp("2025-11-20") * n`,
		`us >= n * timestamp("2025-11-20")`,
		`us >= timestamp("2025-11-20") / n`,
		`us < timestamp("2025-11-20") % n`,
		`timestamp("2025-11-20") * n + 1 <= us`,
		`day >= date("2025-11-20") * n`,
	} {
		if _, err := expr.Compile(src, sch); err == nil {
			t.Errorf("Compile(%q): no error; want one saying the value counts no one unit", src)
		}
	}
	for _, src := range []string{`us >= ms * 1000`, `us >= timestamp("2025-11-20", "us") + n`} {
		if _, err := expr.Compile(src, sch); err != nil {
			t.Errorf("Compile(%q): %v", src, err)
		}
	}
}
