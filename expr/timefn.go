package expr

import (
	"fmt"
	"math"
	"time"
)

// timestamp("2025-11-20T06:00:00Z"[, unit]) is the instant, a constant
// int64 counted in unit since 1970-01-01 00:00 UTC: "ns" (the default,
// how INT96 timestamps decode), "us", "ms" or "s" (how INT64 TIMESTAMP
// columns count). It lets a time-window filter say its date instead of
// a 19-digit number.
func (c *checker) timestamp(n *Call) (*node, error) {
	far := c.far
	c.far = 0
	if len(n.Args) != 1 && len(n.Args) != 2 {
		return nil, errorf(n.At, "timestamp wants 1 or 2 arguments (time[, unit]), got %d", len(n.Args))
	}
	s, err := c.value(n.Args[0])
	if err != nil {
		return nil, err
	}
	if s.t.Kind != String || !s.isConst() || s.isNullConst() {
		return nil, errorf(n.Args[0].Pos(), "timestamp wants a constant string time, got %s", describe(n.Args[0], s))
	}
	unit, instant := "ns", len(n.Args) == 1
	if len(n.Args) == 2 {
		u, err := c.value(n.Args[1])
		if err != nil {
			return nil, err
		}
		if u.t.Kind != String || !u.isConst() || u.isNullConst() || timeUnits[u.constString()] == 0 {
			return nil, errorf(n.Args[1].Pos(), `timestamp wants a unit "ns", "us", "ms" or "s", got %s`, describe(n.Args[1], u))
		}
		unit = u.constString()
	}
	v, err := parseInstant(s.constString(), timeUnits[unit])
	if err != nil && instant && far > 0 {
		// Too far from 1970 for nanoseconds, compared with a column
		// of a coarser unit: counted in it, as sameUnit would.
		if t, perr := parseTime(s.constString()); perr == nil {
			if v, between, ok := countIn(t, far); ok {
				nd := constInt(v, n.At)
				nd.unit, nd.instant, nd.counted, nd.between = far, true, true, between
				return nd, nil
			}
		}
	}
	if err != nil {
		return nil, errorf(n.Args[0].Pos(), "timestamp: %v", err)
	}
	nd := constInt(v, n.At)
	nd.unit, nd.instant = timeUnits[unit], instant
	return nd, nil
}

// sameUnit makes a timestamp() constant compared with a timestamp
// column count the column's unit. One without a unit is an instant in
// nanoseconds, converted so that the comparison means what the time
// says: col < T is col < ceil(T/unit), col <= T is col <= floor(T/unit),
// and an instant between two counts is an error for == and in, which it
// could never equal. One whose unit differs is an error, since comparing
// counts of two units is never what a filter means. Other operands are
// returned as they are; a timestamp() that meets anything but a
// comparison first (arithmetic, a map) stays nanoseconds.
func (c *checker) sameUnit(n *Binary, x, y *node) (*node, *node, error) {
	col, t, colNode, op := x, y, n.X, n.Op
	if y.op == opCol {
		col, t, colNode, op = y, x, n.Y, flipCmp[n.Op]
	}
	if col.op != opCol || col.unit == 0 || t.unit == 0 || !t.isConst() || (t.t.Kind != Int64 && t.unit != dayNanos) {
		return x, y, nil
	}
	if !t.instant {
		if t.unit != col.unit {
			return nil, nil, unitError(n.At, describe(colNode, col), col.unit, t.unit)
		}
		return x, y, nil
	}
	var v, rem int64
	switch {
	case t.counted && t.unit != col.unit:
		return nil, nil, unitError(n.At, describe(colNode, col), col.unit, t.unit)
	case t.counted:
		v = t.out.i64[0] // rounded down already
		if t.between {
			rem = 1
		}
	default:
		ns := t.out.i64[0]
		v, rem = ns/col.unit, ns%col.unit
		if rem < 0 {
			v, rem = v-1, rem+col.unit // rounded down
		}
	}
	switch {
	case rem == 0:
	case op == "<" || op == ">=":
		v++ // rounded up
	case op == "<=" || op == ">":
	default:
		return nil, nil, errorf(n.At, "%s counts %s, and timestamp(...) falls between two of them: no value is equal to it",
			describe(colNode, col), unitWord(col.unit))
	}
	nd := constInt(v, t.pos)
	nd.unit = col.unit
	if t == x {
		return nd, y, nil
	}
	return x, nd, nil
}

// unitError says that a column of unit col was compared with a
// timestamp() or date() of unit given, and what to write instead.
func unitError(pos int, column string, col, given int64) error {
	call, fix := "timestamp(...)", fmt.Sprintf("give timestamp() the column's unit %q, or none", unitAbbrev(col))
	if given == dayNanos {
		call, fix = "date(...)", "compare it with a timestamp() without a unit, which takes the column's"
	}
	if col == dayNanos {
		fix = "compare it with date(...), or a timestamp() without a unit, which takes the column's"
	}
	return errorf(pos, "%s counts %s and %s %s: %s", column, unitWord(col), call, unitWord(given), fix)
}

// dayNanos is the unit of a DATE column and of date(): a day.
const dayNanos = 86400 * int64(time.Second)

// flipCmp is the comparison with its operands swapped.
var flipCmp = map[string]string{"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}

// unitWord and unitAbbrev name a unit of so many nanoseconds.
func unitWord(unit int64) string {
	for _, u := range []struct {
		ns   int64
		name string
	}{{1, "nanoseconds"}, {1e3, "microseconds"}, {1e6, "milliseconds"}, {1e9, "seconds"}, {dayNanos, "days"}} {
		if u.ns == unit {
			return u.name
		}
	}
	return fmt.Sprintf("units of %d ns", unit)
}

func unitAbbrev(unit int64) string {
	for name, ns := range timeUnits {
		if ns == unit {
			return name
		}
	}
	return fmt.Sprint(unit)
}

// date("2025-11-20") is the day, a constant int32 counted in days since
// 1970-01-01, as DATE columns hold it; a time of day is allowed and
// rounded down to its day (UTC unless the time says its zone).
func (c *checker) date(n *Call) (*node, error) {
	if err := arity(n, "day", 1); err != nil {
		return nil, err
	}
	s, err := c.value(n.Args[0])
	if err != nil {
		return nil, err
	}
	if s.t.Kind != String || !s.isConst() || s.isNullConst() {
		return nil, errorf(n.Args[0].Pos(), "date wants a constant string day, got %s", describe(n.Args[0], s))
	}
	t, err := parseTime(s.constString())
	if err != nil {
		return nil, errorf(n.Args[0].Pos(), "date: %v", err)
	}
	v := t.Unix() / 86400
	if t.Unix()%86400 < 0 {
		v-- // round down: 1969-12-31 12:00 is day -1
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return nil, errorf(n.Args[0].Pos(), "date: %s is past what int32 days since 1970 hold", s.constString())
	}
	nd := constOf(Type{Kind: Int32}, n.At)
	nd.out.i32[0] = int32(v)
	nd.unit = dayNanos
	return nd, nil
}

// timeUnits is each unit's length in nanoseconds.
var timeUnits = map[string]int64{"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}

// instantLayouts are the forms a timestamp() time may take; those
// without a zone are UTC.
var instantLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02"}

// parseInstant parses s and counts it in units of unit nanoseconds,
// rounding down; the instant must fit an int64 of them.
func parseInstant(s string, unit int64) (int64, error) {
	t, err := parseTime(s)
	if err != nil {
		return 0, err
	}
	sec, q := t.Unix(), int64(t.Nanosecond())/unit
	v, ok := countOf(sec, q, int64(time.Second)/unit)
	if !ok {
		name := "ns"
		for k, v := range timeUnits {
			if v == unit {
				name = k
			}
		}
		return 0, fmt.Errorf("%s does not fit an int64 of %s since 1970 (in ns: 1677-09-21 to 2262-04-11)", s, name)
	}
	return v, nil
}

// parseTime parses s in the first of instantLayouts that fits.
func parseTime(s string) (time.Time, error) {
	for _, layout := range instantLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time such as 2025-11-20, 2025-11-20 06:00:00 or 2025-11-20T06:00:00+01:00 (RFC 3339; no zone is UTC)", s)
}

// countIn counts t in units of unit nanoseconds (a divisor of a second,
// or a day), rounded down, and says whether it fell between two counts;
// ok is false when the count does not fit an int64.
func countIn(t time.Time, unit int64) (v int64, between, ok bool) {
	sec, nsec := t.Unix(), int64(t.Nanosecond())
	if unit == dayNanos {
		v, r := sec/86400, sec%86400
		if r < 0 {
			v, r = v-1, r+86400
		}
		return v, r != 0 || nsec != 0, true
	}
	if unit <= 0 || int64(time.Second)%unit != 0 {
		return 0, false, false
	}
	v, ok = countOf(sec, nsec/unit, int64(time.Second)/unit)
	return v, nsec%unit != 0, ok
}

// countOf is sec*perSec + q (0 <= q < perSec), and whether it fits an
// int64. Go's division truncates toward zero, so a negative instant is
// taken as (sec+1)*perSec less perSec-q, each step checked.
func countOf(sec, q, perSec int64) (int64, bool) {
	if sec >= 0 {
		if sec > (math.MaxInt64-q)/perSec {
			return 0, false
		}
		return sec*perSec + q, true
	}
	hi := sec + 1
	if hi < math.MinInt64/perSec {
		return 0, false
	}
	base, d := hi*perSec, perSec-q
	if base < math.MinInt64+d {
		return 0, false
	}
	return base - d, true
}
