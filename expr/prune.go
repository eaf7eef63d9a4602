package expr

import "math"

// Range is what a row group's statistics say about one column.
type Range struct {
	// Min and Max bound the non-null values of a numeric or bool column
	// (bools as 0 and 1), MinString and MaxString those of a string column
	// (byte-wise order). They must be true bounds: a truncated Parquet max
	// may be passed only once rounded up. Ignored unless HasBounds.
	Min, Max             float64
	MinString, MaxString string
	HasBounds            bool
	// NullCount is the number of null values; negative when unknown.
	NullCount int64
	// Rows is the number of rows of the row group.
	Rows int64
}

// MayMatch reports whether the expression, a filter predicate, may be
// true for some row of a row group with the given column statistics
// (stats returns false for a column it knows nothing about). It returns
// false only when no row can match, so that the row group can be skipped
// without decoding it. It reasons about comparisons of a column with a
// constant, in and not in, starts_with, is_null, bool columns, and and/or/
// not of those; anything else may match. An expression that is not of
// type bool always may.
func (e *Expr) MayMatch(stats func(col string) (Range, bool)) bool {
	if e.root.t.Kind != Bool {
		return true
	}
	p := pruner{e: e, stats: stats}
	canTrue, _ := p.truth(e.root)
	return canTrue
}

type pruner struct {
	e     *Expr
	stats func(string) (Range, bool)
}

// truth returns whether nd can be true and whether it can be false
// (or null, which a filter reads as false) on some row.
func (p *pruner) truth(nd *node) (canTrue, canFalse bool) {
	switch nd.op {
	case opConst:
		v := nd.out.b[0] == 1 && !nd.isNullConst()
		return v, !v
	case opAnd:
		at, af := p.truth(nd.args[0])
		bt, bf := p.truth(nd.args[1])
		return at && bt, af || bf
	case opOr:
		at, af := p.truth(nd.args[0])
		bt, bf := p.truth(nd.args[1])
		return at || bt, af && bf
	case opNot:
		t, f := p.truth(nd.args[0])
		return f, t
	case opCol:
		r, ok := p.rangeOf(nd)
		if !ok {
			break
		}
		nonNull, nulls := r.counts()
		return nonNull && (!r.HasBounds || r.Max >= 1), nulls || !r.HasBounds || r.Min < 1
	case opIsNull:
		r, ok := p.rangeOf(nd.args[0])
		if !ok {
			break
		}
		nonNull, nulls := r.counts()
		return nulls, nonNull
	case opEq, opNe, opLt, opLe, opGt, opGe:
		return p.compare(nd)
	case opIn, opNotIn:
		return p.in(nd)
	case opStartsWith:
		r, ok := p.rangeOf(nd.args[0])
		if !ok {
			break
		}
		nonNull, _ := r.counts()
		if !nonNull {
			return false, true
		}
		if !r.HasBounds {
			break
		}
		hi, bounded := prefixEnd(nd.prefix)
		return r.MaxString >= nd.prefix && (!bounded || r.MinString < hi), true
	}
	return true, true
}

// counts returns whether the row group may hold non-null rows and null
// rows.
func (r *Range) counts() (nonNull, nulls bool) {
	if r.NullCount < 0 {
		return r.Rows > 0, r.Rows > 0
	}
	return r.NullCount < r.Rows, r.NullCount > 0
}

// rangeOf returns the statistics of the column nd reads, seeing through
// casts that preserve order and nulls (int32 → int64, ints → floats,
// float32 → float64). Bounds of magnitude 2^53 and more are widened by an
// ulp, since an int64 statistic may have been rounded to reach a float64.
func (p *pruner) rangeOf(nd *node) (Range, bool) {
	toF32 := false // an int → float32 cast rounds above 2^24
	for nd.op == opCast {
		from, to := nd.args[0].t.Kind, nd.t.Kind
		if !(from == Int32 && to == Int64 || from.IsInt() && to.IsFloat() || from == Float32 && to == Float64 || from == Bool) {
			return Range{}, false
		}
		if from.IsInt() && to == Float32 {
			toF32 = true
		}
		nd = nd.args[0]
	}
	if nd.op != opCol || p.stats == nil {
		return Range{}, false
	}
	r, ok := p.stats(p.e.cols[nd.col].name)
	if !ok {
		return r, false
	}
	if math.Abs(r.Min) >= 1<<53 {
		r.Min = math.Nextafter(r.Min, math.Inf(-1))
	}
	if math.Abs(r.Max) >= 1<<53 {
		r.Max = math.Nextafter(r.Max, math.Inf(1))
	}
	if toF32 {
		// Rounding to nearest is monotone: the rounded bounds bound
		// the rounded values.
		r.Min, r.Max = float64(float32(r.Min)), float64(float32(r.Max))
	}
	if math.IsNaN(r.Min) || math.IsNaN(r.Max) {
		r.HasBounds = false
	}
	return r, true
}

// baseKind is the kind of the column under order-preserving casts.
func baseKind(nd *node) Kind {
	for nd.op == opCast {
		nd = nd.args[0]
	}
	return nd.t.Kind
}

func (p *pruner) compare(nd *node) (canTrue, canFalse bool) {
	o, x, c := nd.op, nd.args[0], nd.args[1]
	if x.isConst() {
		o, x, c = o.swap(), c, x
	}
	if !c.isConst() || c.isNullConst() {
		return true, true
	}
	r, ok := p.rangeOf(x)
	if !ok {
		return true, true
	}
	nonNull, nulls := r.counts()
	if !nonNull {
		return false, true
	}
	if !r.HasBounds {
		return true, true
	}
	// NaNs are not in float statistics: a NaN row makes != true and every
	// other comparison false.
	nan := baseKind(x).IsFloat()
	var minC, maxC int // sign of min - c and max - c
	if c.t.Kind == String {
		minC, maxC = cmpStr(r.MinString, c.constString()), cmpStr(r.MaxString, c.constString())
	} else {
		v := c.constFloat64()
		if math.IsNaN(v) || math.Abs(v) >= 1<<53 && baseKind(x) == Int64 {
			return true, true
		}
		minC, maxC = cmpFloat(r.Min, v), cmpFloat(r.Max, v)
	}
	allEq := minC == 0 && maxC == 0
	inside := minC <= 0 && maxC >= 0
	switch o {
	case opEq:
		canTrue, canFalse = inside, !allEq
	case opNe:
		canTrue, canFalse = !allEq || nan, inside
	case opLt:
		canTrue, canFalse = minC < 0, maxC >= 0
	case opLe:
		canTrue, canFalse = minC <= 0, maxC > 0
	case opGt:
		canTrue, canFalse = maxC > 0, minC <= 0
	case opGe:
		canTrue, canFalse = maxC >= 0, minC < 0
	}
	return canTrue, canFalse || nulls || nan
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (p *pruner) in(nd *node) (canTrue, canFalse bool) {
	x := nd.args[0]
	r, ok := p.rangeOf(x)
	if !ok {
		return true, true
	}
	nonNull, nulls := r.counts()
	if !nonNull {
		return false, true
	}
	if !r.HasBounds {
		return true, true
	}
	nan := baseKind(x).IsFloat()
	// any: some set value lies in [min, max]; all: min == max and it is
	// in the set, so every non-null row is in the set.
	var anyIn, allIn bool
	s := &nd.set
	if x.t.Kind == String {
		for _, v := range s.strs {
			anyIn = anyIn || r.MinString <= v && v <= r.MaxString
			allIn = allIn || r.MinString == v && r.MaxString == v
		}
	} else {
		vals := s.floats()
		if baseKind(x) == Int64 {
			for _, v := range vals {
				if math.Abs(v) >= 1<<53 {
					return true, true
				}
			}
		}
		for _, v := range vals {
			anyIn = anyIn || r.Min <= v && v <= r.Max
			allIn = allIn || r.Min == v && r.Max == v
		}
	}
	if nd.op == opIn {
		return anyIn, !allIn || nulls || nan
	}
	return !allIn || nan, anyIn || nulls
}

// floats returns a numeric set's values as float64s.
func (s *inSet) floats() []float64 {
	var out []float64
	for _, v := range s.i32 {
		out = append(out, float64(v))
	}
	for _, v := range s.i64 {
		out = append(out, float64(v))
	}
	for _, v := range s.f32 {
		out = append(out, float64(v))
	}
	return append(out, s.f64...)
}

// prefixEnd returns the smallest string above every string with the
// prefix p, if there is one (there is none when p is all 0xff bytes).
func prefixEnd(p string) (string, bool) {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}
