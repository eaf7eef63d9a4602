package expr

import (
	"math"
	"sort"

	"github.com/lastmile/lastmile/internal/suggest"
)

// funcs maps a function name to its checker. Every entry is documented in
// docs/expressions.md.
var funcs map[string]func(c *checker, n *Call) (*node, error)

func init() {
	funcs = map[string]func(c *checker, n *Call) (*node, error){
		"is_null":     (*checker).isNull,
		"fill_null":   (*checker).fillNull,
		"if":          (*checker).ifCall,
		"starts_with": (*checker).startsWith,
		"log1p":       mathFunc(opLog1p),
		"log":         mathFunc(opLog),
		"exp":         mathFunc(opExp),
		"sqrt":        mathFunc(opSqrt),
		"abs":         (*checker).abs,
		"min":         minMaxFunc(opMin),
		"max":         minMaxFunc(opMax),
		"clip":        (*checker).clip,
		"bucketize":   (*checker).bucketize,
		"hash_mod":    (*checker).hashMod,
		"len":         (*checker).length,
		"cast":        (*checker).cast,
		"timestamp":   (*checker).timestamp,
		"date":        (*checker).date,
	}
}

func (c *checker) call(n *Call) (*node, error) {
	f, ok := funcs[n.Func]
	if !ok {
		names := make([]string, 0, len(funcs))
		for name := range funcs {
			names = append(names, name)
		}
		sort.Strings(names)
		msg := "unknown function " + quoteList([]string{n.Func})
		if s := suggest.Nearest(n.Func, names); s != "" {
			msg += " (did you mean " + quoteList([]string{s}) + "?)"
		}
		return nil, &Error{Pos: n.At, Msg: msg}
	}
	return f(c, n)
}

// arity fails unless n has exactly len(params) arguments.
func arity(n *Call, params string, want int) error {
	if len(n.Args) != want {
		return errorf(n.At, "%s wants %d arguments (%s), got %d", n.Func, want, params, len(n.Args))
	}
	return nil
}

func (c *checker) number(n *Call, arg int) (*node, error) {
	x, err := c.value(n.Args[arg])
	if err != nil {
		return nil, err
	}
	if !x.t.Kind.IsNumber() {
		return nil, errorf(n.Args[arg].Pos(), "%s wants a number, got %s", n.Func, describe(n.Args[arg], x))
	}
	return x, nil
}

func (c *checker) isNull(n *Call) (*node, error) {
	if err := arity(n, "x", 1); err != nil {
		return nil, err
	}
	x, err := c.any(n.Args[0])
	if err != nil {
		return nil, err
	}
	if !x.t.Nullable {
		return constBool(false, n.At), nil
	}
	return c.fold(&node{op: opIsNull, t: Type{Kind: Bool}, pos: n.At, args: []*node{x}}), nil
}

// common converts a and b (already checked) to one type for fill_null,
// if and min/max, or fails naming f.
func (c *checker) common(f string, an, bn Node, a, b *node, pos int) (*node, *node, error) {
	ka, kb := a.t.Kind, b.t.Kind
	switch {
	case a.null && b.null:
		return nil, nil, errorf(pos, "%s needs a non-null value to know its type", f)
	case a.null:
		return nullConst(kb, a.pos), c.convertUntyped(b), nil
	case b.null:
		return c.convertUntyped(a), nullConst(ka, b.pos), nil
	case ka.IsNumber() && kb.IsNumber():
		a, b = c.unify(a, b)
		return a, b, nil
	case ka == kb && (ka == String || ka == Bool):
		return a, b, nil
	}
	return nil, nil, errorf(pos, "%s wants values of one type, got %s and %s", f, describe(an, a), describe(bn, b))
}

func (c *checker) fillNull(n *Call) (*node, error) {
	if err := arity(n, "x, value", 2); err != nil {
		return nil, err
	}
	x, err := c.value(n.Args[0])
	if err != nil {
		return nil, err
	}
	v, err := c.value(n.Args[1])
	if err != nil {
		return nil, err
	}
	xv := []*node{x, v}
	unit, err := c.copyUnit(n.At, n.Args, xv)
	if err != nil {
		return nil, err
	}
	x, v = xv[0], xv[1]
	untyped := x.untyped && v.untyped
	x, v, err = c.common("fill_null", n.Args[0], n.Args[1], x, v, n.At)
	if err != nil {
		return nil, err
	}
	if !x.t.Nullable {
		if untyped { // fill_null(1, 2): still a literal
			cp := *x
			cp.untyped = true
			return &cp, nil
		}
		return x, nil
	}
	nd := &node{op: opFillNull, t: Type{Kind: x.t.Kind, Nullable: v.t.Nullable}, pos: n.At, args: []*node{x, v}, unit: unit}
	nd.untyped = untyped
	return c.fold(nd), nil
}

func (c *checker) ifCall(n *Call) (*node, error) {
	if err := arity(n, "cond, then, else", 3); err != nil {
		return nil, err
	}
	cond, err := c.value(n.Args[0])
	if err != nil {
		return nil, err
	}
	if cond.t.Kind != Bool {
		return nil, errorf(n.Args[0].Pos(), "if wants a bool condition, got %s", describe(n.Args[0], cond))
	}
	var br [2]*node
	for i := range br {
		a := n.Args[1+i]
		if br[i], err = c.any(a); err != nil {
			return nil, err
		}
		if k := br[i].t.Kind; k == List || k == BFloat16 {
			if _, err := c.value(a); err != nil {
				return nil, err
			}
		}
	}
	unit, err := c.copyUnit(n.At, n.Args[1:], br[:])
	if err != nil {
		return nil, err
	}
	a, b, err := c.common("if", n.Args[1], n.Args[2], br[0], br[1], n.At)
	if err != nil {
		return nil, err
	}
	if cond.isConst() {
		if cond.out.b[0] == 1 && !cond.isNullConst() {
			return a, nil
		}
		return b, nil
	}
	nd := &node{op: opIf, t: Type{Kind: a.t.Kind, Nullable: a.t.Nullable || b.t.Nullable}, pos: n.At, args: []*node{cond, a, b}, unit: unit}
	return nd, nil
}

func (c *checker) startsWith(n *Call) (*node, error) {
	if err := arity(n, "s, prefix", 2); err != nil {
		return nil, err
	}
	s, err := c.value(n.Args[0])
	if err != nil {
		return nil, err
	}
	if s.t.Kind != String {
		return nil, errorf(n.Args[0].Pos(), "starts_with wants a string, got %s", describe(n.Args[0], s))
	}
	p, err := c.value(n.Args[1])
	if err != nil {
		return nil, err
	}
	if p.t.Kind != String || !p.isConst() {
		return nil, errorf(n.Args[1].Pos(), "starts_with wants a constant string prefix, got %s", describe(n.Args[1], p))
	}
	nd := &node{op: opStartsWith, t: Type{Kind: Bool}, pos: n.At, args: []*node{s}, prefix: p.constString()}
	return c.fold(nd), nil
}

func mathFunc(o op) func(c *checker, n *Call) (*node, error) {
	return func(c *checker, n *Call) (*node, error) {
		if err := arity(n, "x", 1); err != nil {
			return nil, err
		}
		x, err := c.number(n, 0)
		if err != nil {
			return nil, err
		}
		if x.t.Kind != Float32 {
			x = c.convert(x, Float64)
		}
		return c.fold(&node{op: o, t: x.t, pos: n.At, args: []*node{x}, unit: opaque(x)}), nil
	}
}

func (c *checker) abs(n *Call) (*node, error) {
	if err := arity(n, "x", 1); err != nil {
		return nil, err
	}
	x, err := c.number(n, 0)
	if err != nil {
		return nil, err
	}
	nd := &node{op: opAbs, t: x.t, pos: n.At, args: []*node{x}, untyped: x.untyped, unit: opaque(x)}
	return c.fold(nd), nil
}

func minMaxFunc(o op) func(c *checker, n *Call) (*node, error) {
	return func(c *checker, n *Call) (*node, error) {
		if len(n.Args) < 2 {
			return nil, errorf(n.At, "%s wants at least 2 arguments, got %d", n.Func, len(n.Args))
		}
		acc, err := c.number(n, 0)
		if err != nil {
			return nil, err
		}
		var accAt Node = n.Args[0]
		for i := 1; i < len(n.Args); i++ {
			y, err := c.number(n, i)
			if err != nil {
				return nil, err
			}
			if acc, err = c.minMaxNode(o, [2]Node{accAt, n.Args[i]}, acc, y, n.At); err != nil {
				return nil, err
			}
			accAt = nil
		}
		return acc, nil
	}
}

// minMaxNode is min(x, y) or max(x, y); asts names x and y for errors
// (nil where x is min or max of earlier operands).
func (c *checker) minMaxNode(o op, asts [2]Node, x, y *node, pos int) (*node, error) {
	xy := []*node{x, y}
	unit, err := c.copyUnit(pos, asts[:], xy)
	if err != nil {
		return nil, err
	}
	x, y = xy[0], xy[1]
	untyped := x.untyped && y.untyped
	x, y = c.unify(x, y)
	nd := &node{op: o, t: Type{Kind: x.t.Kind, Nullable: x.t.Nullable || y.t.Nullable}, pos: pos, args: []*node{x, y}, unit: unit}
	nd.untyped = untyped
	return c.fold(nd), nil
}

// clip(x, lo, hi) is min(max(x, lo), hi).
func (c *checker) clip(n *Call) (*node, error) {
	if err := arity(n, "x, lo, hi", 3); err != nil {
		return nil, err
	}
	var a [3]*node
	for i := range a {
		var err error
		if a[i], err = c.number(n, i); err != nil {
			return nil, err
		}
	}
	if a[1].isConst() && a[2].isConst() && a[1].constFloat64() > a[2].constFloat64() {
		return nil, errorf(n.Args[1].Pos(), "clip: lo %s is above hi %s", n.Args[1], n.Args[2])
	}
	lo, err := c.minMaxNode(opMax, [2]Node{n.Args[0], n.Args[1]}, a[0], a[1], n.At)
	if err != nil {
		return nil, err
	}
	return c.minMaxNode(opMin, [2]Node{nil, n.Args[2]}, lo, a[2], n.At)
}

func (c *checker) length(n *Call) (*node, error) {
	if err := arity(n, "list", 1); err != nil {
		return nil, err
	}
	x, err := c.any(n.Args[0])
	if err != nil {
		return nil, err
	}
	if x.t.Kind != List && x.t.Kind != String {
		return nil, errorf(n.Args[0].Pos(), "len wants a list or string column, got %s", describe(n.Args[0], x))
	}
	return c.fold(&node{op: opLen, t: Type{Kind: Int32, Nullable: x.t.Nullable}, pos: n.At, args: []*node{x}}), nil
}

var castKinds = map[string]Kind{"int32": Int32, "int64": Int64, "float32": Float32, "float64": Float64, "bfloat16": BFloat16}

func (c *checker) cast(n *Call) (*node, error) {
	if err := arity(n, "x, type", 2); err != nil {
		return nil, err
	}
	id, ok := n.Args[1].(*Ident)
	var k Kind
	if ok && !id.Quoted {
		k = castKinds[id.Name]
	}
	if k == Invalid {
		return nil, errorf(n.Args[1].Pos(), "cast wants a type (int32, int64, float32, float64 or bfloat16), got %s", n.Args[1])
	}
	x, err := c.value(n.Args[0])
	if err != nil {
		return nil, err
	}
	if !x.t.Kind.IsNumber() && x.t.Kind != Bool {
		return nil, errorf(n.Args[0].Pos(), "cast wants a number or bool, got %s", describe(n.Args[0], x))
	}
	if k == BFloat16 {
		// Round from float32, as torch does for float32 → bfloat16.
		x = c.convert(x, Float32)
		return c.fold(&node{op: opCast, t: Type{Kind: BFloat16, Nullable: x.t.Nullable}, pos: n.At, args: []*node{x}, unit: opaque(x)}), nil
	}
	return c.convert(x, k), nil
}

// in checks x in (...) and x not in (...): the values must be constants of
// x's type; numbers are converted to x's kind, and those that cannot
// equal any value of that kind (3.5 for an int column, 2^40 for int32)
// are dropped.
func (c *checker) in(n *Binary) (*node, error) {
	x, err := c.value(n.X)
	if err != nil {
		return nil, err
	}
	l, ok := n.Y.(*ListLit)
	if !ok {
		return nil, errorf(n.Y.Pos(), "%s wants a list of constants, got %s", n.Op, n.Y)
	}
	k := x.t.Kind
	if k == Bool {
		return nil, errorf(n.At, "%s does not apply to bools; use == true or == false", n.Op)
	}
	o := opIn
	if n.Op == "not in" {
		o = opNotIn
	}
	nd := &node{op: o, t: Type{Kind: Bool}, pos: n.At, args: []*node{x}}
	for _, e := range l.Elems {
		c.far = c.farUnit(e, n.X)
		v, err := c.value(e)
		if err != nil {
			return nil, err
		}
		if _, v, err = c.sameUnit(n, x, v); err != nil {
			return nil, err
		}
		if !v.isConst() {
			return nil, errorf(e.Pos(), "%s wants constants, got %s", n.Op, describe(e, v))
		}
		switch {
		case k == String && v.t.Kind == String:
			nd.set.strs = append(nd.set.strs, v.constString())
		case k.IsNumber() && v.t.Kind.IsNumber():
			if iv, ok := v.constInt64(); ok {
				nd.set.addInt(k, iv)
			} else {
				nd.set.addFloat(k, v.constFloat64())
			}
		default:
			return nil, errorf(e.Pos(), "%s: cannot compare %s with %s", n.Op, describe(n.X, x), describe(e, v))
		}
	}
	nd.set.finish(k)
	return c.fold(nd), nil
}

func (c *checker) bucketize(n *Call) (*node, error) {
	if err := arity(n, "x, [boundaries]", 2); err != nil {
		return nil, err
	}
	x, err := c.number(n, 0)
	if err != nil {
		return nil, err
	}
	l, ok := n.Args[1].(*ListLit)
	if !ok || l.Paren {
		return nil, errorf(n.Args[1].Pos(), "bucketize wants its boundaries as a list [b0, b1, ...], got %s", n.Args[1])
	}
	bs := make([]float64, 0, len(l.Elems))
	ints := make([]*int64, 0, len(l.Elems)) // an integer boundary exactly
	for i, e := range l.Elems {
		if call, ok := e.(*Call); ok && call.Func == "timestamp" && len(call.Args) == 1 && !x.isConst() && x.unit > 1 {
			c.far = x.unit // bucketize(ts, [timestamp("9999-12-31")]) counts ts's unit
		}
		v, err := c.value(e)
		c.far = 0
		if err != nil {
			return nil, err
		}
		if v, err = boundaryUnit(n.Args[0], x, e, v); err != nil {
			return nil, err
		}
		if !v.isConst() || !v.t.Kind.IsNumber() {
			return nil, errorf(e.Pos(), "bucketize wants constant numbers as boundaries, got %s", describe(e, v))
		}
		f := v.constFloat64()
		var exact *int64
		if iv, ok := v.constInt64(); ok {
			exact = &iv
		}
		if math.IsNaN(f) || i > 0 && (f < bs[i-1] || exact != nil && ints[i-1] != nil && *exact < *ints[i-1]) {
			return nil, errorf(e.Pos(), "bucketize boundaries must be sorted ascending, got %s after %s", e, l.Elems[i-1])
		}
		bs = append(bs, f)
		ints = append(ints, exact)
	}
	nd := &node{op: opBucketize, t: Type{Kind: Int32, Nullable: x.t.Nullable}, pos: n.At, args: []*node{x}}
	nd.bounds = makeBounds(x.t.Kind, bs, ints)
	return c.fold(nd), nil
}

func (c *checker) hashMod(n *Call) (*node, error) {
	if err := arity(n, "x, m", 2); err != nil {
		return nil, err
	}
	x, err := c.value(n.Args[0])
	if err != nil {
		return nil, err
	}
	if k := x.t.Kind; !k.IsNumber() && k != String && k != Bool {
		return nil, errorf(n.Args[0].Pos(), "hash_mod wants a number, bool or string, got %s", describe(n.Args[0], x))
	}
	m, err := c.value(n.Args[1])
	if err != nil {
		return nil, err
	}
	if !m.isConst() || m.t.Kind != Int64 || m.out.i64[0] < 1 {
		return nil, errorf(n.Args[1].Pos(), "hash_mod wants a constant integer modulus >= 1, got %s", describe(n.Args[1], m))
	}
	x = c.convertUntyped(x)
	nd := &node{op: opHashMod, t: Type{Kind: Int64, Nullable: x.t.Nullable}, pos: n.At, args: []*node{x}}
	nd.mod = newDivisor(uint64(m.out.i64[0]))
	return c.fold(nd), nil
}

// convertUntyped gives an untyped literal its default kind.
func (c *checker) convertUntyped(nd *node) *node {
	if nd.untyped {
		return c.convert(nd, nd.t.Kind)
	}
	return nd
}
