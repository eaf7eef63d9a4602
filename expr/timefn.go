package expr

import (
	"fmt"
	"math"
	"time"

	col "github.com/lastmile/lastmile/column"
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
// counts of two units is never what a filter means. The column may be
// any value of a unit (a copy of a column: a map's, if(), fill_null());
// one of UnknownUnit compared with a timestamp() without a unit is an
// error. Two values of different units compared are an error too.
// Other operands are returned as they are.
func (c *checker) sameUnit(n *Binary, x, y *node) (*node, *node, error) {
	if !x.isConst() && !y.isConst() && x.unit > 0 && y.unit > 0 && x.unit != y.unit {
		return nil, nil, errorf(n.At, "%s counts %s and %s %s: their counts cannot be compared; "+
			"convert one to the other's unit by arithmetic (ms * 1000 counts microseconds)",
			describe(n.X, x), unitWord(x.unit), describe(n.Y, y), unitWord(y.unit))
	}
	for _, p := range [...]struct {
		col, v  *node
		colNode Node
	}{{x, y, n.X}, {y, x, n.Y}} {
		if p.v.shifted && p.col.unit > 0 && !p.col.isConst() {
			return nil, nil, unitError(n.At, describe(p.colNode, p.col), p.col.unit, UnknownUnit)
		}
	}
	col, t, colNode, op := x, y, n.X, n.Op
	if x.isConst() && !y.isConst() {
		col, t, colNode, op = y, x, n.Y, flipCmp[n.Op]
	}
	if col.isConst() || col.unit == 0 || t.unit == 0 || !t.isConst() {
		return x, y, nil
	}
	switch {
	case col.unit == UnknownUnit && (t.instant || t.unit == UnknownUnit):
		return nil, nil, unknownUnitError(n.At, describe(colNode, col))
	case col.unit == UnknownUnit:
		return x, y, nil // a unit given is taken at its word
	case t.unit == UnknownUnit:
		return nil, nil, unitError(n.At, describe(colNode, col), col.unit, t.unit)
	case t.t.Kind != Int64 && t.unit != dayNanos:
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
	if given == UnknownUnit {
		return errorf(pos, "%s counts %s, and the value it meets is computed from a timestamp() or date() by more than adding or subtracting a whole number, so it counts no one unit: "+
			"write the time in timestamp() itself, as in timestamp(\"2025-11-19T12:00:00Z\")", column, unitWord(col))
	}
	call, fix := "timestamp(...)", fmt.Sprintf("give timestamp() the column's unit %q, or none", unitAbbrev(col))
	if given == dayNanos {
		call, fix = "date(...)", "compare it with a timestamp() without a unit, which takes the column's"
	}
	if col == dayNanos {
		fix = "compare it with date(...), or a timestamp() without a unit, which takes the column's"
	}
	return errorf(pos, "%s counts %s and %s %s: %s", column, unitWord(col), call, unitWord(given), fix)
}

// unknownUnitError says that a value of UnknownUnit was compared with a
// timestamp() without a unit, and what to write instead.
func unknownUnitError(pos int, value string) error {
	return errorf(pos, "%s is computed from timestamps, but not as a copy of them (arithmetic, a number of no unit beside them, a cast to int32 or float32), so its unit is not known: "+
		`give timestamp() the unit the value counts, as in timestamp("2025-11-20", "us")`, value)
}

// boundaryUnit counts v, a boundary of bucketize(x, ...), in the unit of
// x where x is a timestamp and v a timestamp() without a unit: rounded up,
// since a boundary counts where b <= x, which for an instant T between
// two counts is x >= ceil(T). One of another unit, or one without a unit
// against an x of UnknownUnit, is an error, as in a comparison.
func boundaryUnit(xn Node, x *node, e Node, v *node) (*node, error) {
	if x.isConst() || x.unit == 0 || !v.isConst() || v.unit == 0 {
		return v, nil
	}
	switch {
	case x.unit == UnknownUnit && (v.instant || v.unit == UnknownUnit):
		return nil, unknownUnitError(e.Pos(), describe(xn, x))
	case x.unit == UnknownUnit:
		return v, nil // a unit given is taken at its word
	case v.instant && v.counted && v.unit == x.unit:
		if !v.between {
			return v, nil
		}
		nd := constInt(v.out.i64[0]+1, v.pos)
		nd.unit = x.unit
		return nd, nil
	case v.instant && !v.counted && v.t.Kind == Int64:
		ns := v.out.i64[0]
		q, r := ns/x.unit, ns%x.unit
		if r < 0 {
			q, r = q-1, r+x.unit
		}
		if r > 0 {
			q++ // rounded up
		}
		nd := constInt(q, v.pos)
		nd.unit = x.unit
		return nd, nil
	case v.unit != x.unit || v.instant:
		return nil, unitError(e.Pos(), describe(xn, x), x.unit, v.unit)
	}
	return v, nil
}

// dayNanos is the unit of a DATE column and of date(): a day.
const dayNanos = 86400 * int64(time.Second)

// flipCmp is the comparison with its operands swapped.
var flipCmp = map[string]string{"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}

// unitWord names a unit of so many nanoseconds (column.UnitName; this
// package's code names its columns "column").
func unitWord(unit int64) string { return col.UnitName(unit) }

// unitAbbrev names a unit of so many nanoseconds as timestamp() takes it.
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

// UnknownUnit is the Unit of a value computed from timestamps whose unit
// cannot be known: arithmetic on them, a number of no unit beside them
// (fill_null(ts, n)), a cast that changes their counts (to int32 or float32). A
// timestamp() without a unit compared with it is an error, since it would
// have to guess what to count; one with a unit is taken at its word.
const UnknownUnit = -1

// opaque is the unit of a value computed from args by anything but a
// copy (arithmetic, -x, abs, log, ...): UnknownUnit where a timestamp
// goes in, 0 otherwise. Constants do not count: a timestamp() meeting
// only literals is folded to a plain number, as before.
func opaque(args ...*node) int64 {
	for _, a := range args {
		if !a.isConst() && a.unit != 0 {
			return UnknownUnit
		}
	}
	return 0
}

// copyUnit is the unit of a value that is one of args, row by row:
// if()'s branches, fill_null's value and its fill, min's, max's and
// clip's operands. Timestamp columns of two units among them are an
// error (max would compare their counts). Where they count one unit, a
// timestamp() without a unit among them is counted in it (rounded down)
// and one with another unit is an error, as in a comparison; the result
// counts that unit, unless a number of no unit (an int column) or of
// UnknownUnit is among them: then its unit is unknown. args is updated
// in place; asts, where not nil, names them for errors.
func (c *checker) copyUnit(pos int, asts []Node, args []*node) (int64, error) {
	var col int64 // the columns' unit; UnknownUnit where one's is not known
	colAt, plain := -1, false
	name := func(i int) string {
		if asts != nil && asts[i] != nil {
			return describe(asts[i], args[i])
		}
		return args[i].t.Kind.String() + " value"
	}
	for i, a := range args {
		switch {
		case a.isConst():
		case a.unit == 0:
			plain = true
		case col == 0:
			col, colAt = a.unit, i
		case a.unit == UnknownUnit || col == UnknownUnit:
			col = UnknownUnit
		case col != a.unit:
			// max would compare counts of two units, if and
			// fill_null mix them in one column.
			return 0, errorf(pos, "%s counts %s and %s %s: convert one to the other's unit by arithmetic (ms * 1000 counts microseconds)",
				name(colAt), unitWord(col), name(i), unitWord(a.unit))
		}
	}
	if col < 0 {
		return UnknownUnit, nil
	}
	if col == 0 {
		// No timestamp columns: the constants' unit, where they agree
		// and no plain number is among them (which stays plain).
		var u int64
		for _, a := range args {
			switch {
			case !a.isConst() || a.unit == 0:
			case u == 0:
				u = a.unit
			case u != a.unit:
				u = UnknownUnit
			}
		}
		if plain {
			return 0, nil
		}
		return u, nil
	}
	for i, a := range args {
		switch {
		case !a.isConst() || a.unit == 0 || a.unit == col && (!a.instant || a.counted):
		case a.instant && !a.counted && a.t.Kind == Int64:
			ns := a.out.i64[0]
			v := ns / col
			if ns%col < 0 {
				v-- // rounded down
			}
			nd := constInt(v, a.pos)
			nd.unit, nd.untyped = col, true // adopts int32 for a DATE column
			args[i] = nd
		default:
			return 0, unitError(pos, name(colAt), col, a.unit)
		}
	}
	if plain {
		return UnknownUnit, nil
	}
	return col, nil
}

// constArithUnit is the unit of x o y where both are constants and one
// is a timestamp() or date(): an instant, or a count of a unit, plus or
// minus a whole number is one still, of the same unit (what a
// comparison with a timestamp column converts); anything else computed
// from one (a product, a float, a difference of two, a number minus
// one) is of UnknownUnit, which a comparison with a timestamp column
// refuses. 0 where neither is a timestamp() or date().
func constArithUnit(o op, x, y *node) (unit int64, instant bool) {
	if !x.isConst() || !y.isConst() || x.unit == 0 && y.unit == 0 {
		return 0, false
	}
	t, k := x, y
	if t.unit == 0 {
		t, k = y, x
	}
	if (o == opAdd || o == opSub && t == x) && k.unit == 0 && k.t.Kind.IsInt() && t.t.Kind.IsInt() && !t.counted {
		return t.unit, t.instant
	}
	return UnknownUnit, false
}

// shiftedUnit is the unit of x o y where one is a timestamp() or date()
// constant and the other a value of no unit that is not a constant (an
// integer column): the constant plus or minus the value is an instant
// still, counted as the constant counts (nanoseconds for a timestamp()
// without a unit), as it is plus a whole-number literal
// (constArithUnit), so that compared with a timestamp column of another
// unit it is an error rather than counts of two units. Anything else
// computed so (a product, a float, the value minus the constant) counts
// no one unit. 0 where neither operand is such a constant.
func shiftedUnit(o op, x, y *node) int64 {
	t, k := x, y
	if !t.isConst() {
		t, k = y, x
	}
	if !t.isConst() || k.isConst() || t.unit == 0 || k.unit != 0 {
		return 0
	}
	if t.unit > 0 && (o == opAdd || o == opSub && t == x) && k.t.Kind.IsInt() && t.t.Kind.IsInt() && !t.counted {
		return t.unit
	}
	return UnknownUnit
}

// castUnit is the unit of x converted to kind k: x's where the count is
// the same (to int64 or float64, or int32 from int32), unknown where the
// cast changes it (wraps to int32, rounds to float32 or bfloat16).
func castUnit(x *node, k Kind) int64 {
	switch {
	case x.unit == 0 || x.isConst():
		return 0
	case k == Int64 || k == Float64 || k == x.t.Kind, k == Float32 && x.unit == dayNanos: // days fit float32 exactly
		return x.unit
	}
	return UnknownUnit
}
