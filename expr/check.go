package expr

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lastmile/lastmile/internal/suggest"
)

// checker turns a parsed tree into a checked one: it resolves columns,
// gives every node a type, converts literals to the kind of the operand
// they meet, inserts casts where numeric kinds are promoted, and folds
// constant subtrees.
type checker struct {
	schema Schema
	cols   []colRef
	// far is the unit of the timestamp column the operand being checked
	// is compared with (0: none): a timestamp() without a unit that is
	// too far from 1970 for nanoseconds is counted in it (timefn.go).
	far    int64
	noFold bool // tests: keep constant subtrees, to check folding against them
}

func (c *checker) column(id *Ident) (*node, error) {
	f, ok := c.schema.field(id.Name)
	t := f.Type
	if !ok {
		msg := fmt.Sprintf("unknown column %q", id.Name)
		names := make([]string, len(c.schema))
		for i, f := range c.schema {
			names[i] = f.Name
		}
		if s := suggest.Nearest(id.Name, names); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		return nil, &Error{Pos: id.At, Msg: msg}
	}
	if t.Kind == Invalid || t.Kind == BFloat16 || t.Kind > List {
		return nil, errorf(id.At, "column %q has type %v, which expressions cannot read", id.Name, t)
	}
	i := 0
	for i < len(c.cols) && c.cols[i].name != id.Name {
		i++
	}
	if i == len(c.cols) {
		c.cols = append(c.cols, colRef{name: id.Name, t: t})
	}
	return &node{op: opCol, t: t, pos: id.At, col: i, unit: f.Unit}, nil
}

// any checks n in a context that accepts every value: the null literal,
// list columns and bfloat16.
func (c *checker) any(n Node) (*node, error) {
	switch n := n.(type) {
	case *Ident:
		return c.column(n)
	case *Lit:
		switch n.Kind {
		case IntLit:
			nd := constInt(n.Int, n.At)
			nd.untyped = true
			return nd, nil
		case FloatLit:
			nd := constFloat(n.Float, n.At)
			nd.untyped = true
			return nd, nil
		case StringLit:
			return constString(n.Str, n.At), nil
		case BoolLit:
			return constBool(n.Bool, n.At), nil
		}
		nd := nullConst(Invalid, n.At)
		nd.null = true
		return nd, nil
	case *Unary:
		return c.unary(n)
	case *Binary:
		return c.binary(n)
	case *Call:
		return c.call(n)
	case *ListLit:
		return nil, errorf(n.At, "a list is only allowed after in and as the boundaries of bucketize")
	}
	return nil, errorf(n.Pos(), "BUG: unknown node %T", n)
}

// value checks n where an ordinary value is needed: not null, not a list
// column, not bfloat16.
func (c *checker) value(n Node) (*node, error) {
	nd, err := c.any(n)
	if err != nil {
		return nil, err
	}
	switch {
	case nd.null:
		return nil, errorf(n.Pos(), "null is only allowed as a branch of if(); test for nulls with is_null(x)")
	case nd.t.Kind == List:
		return nil, errorf(n.Pos(), "%s can only be used in len() or is_null()", describe(n, nd))
	case nd.t.Kind == BFloat16:
		return nil, errorf(n.Pos(), "bfloat16 is an output type: cast(..., bfloat16) must be the outermost call")
	}
	return nd, nil
}

// describe names a checked value for messages: `string column "query"`,
// `int64 literal 3`, `float32 value log1p(x)`.
func describe(n Node, nd *node) string {
	t := nd.t.Kind.String()
	if nd.untyped {
		if nd.t.Kind == Int64 {
			t = "integer"
		} else {
			t = "float"
		}
	}
	switch n := n.(type) {
	case *Ident:
		return fmt.Sprintf("%s column %q", t, n.Name)
	case *Lit:
		if n.Kind == StringLit {
			return "string " + n.String()
		}
		return fmt.Sprintf("%s %s", t, n.String())
	}
	return fmt.Sprintf("%s value %s", t, n.String())
}

func (c *checker) unary(n *Unary) (*node, error) {
	x, err := c.value(n.X)
	if err != nil {
		return nil, err
	}
	if n.Op == "not" {
		if x.t.Kind != Bool {
			return nil, errorf(n.At, "not wants a bool, got %s", describe(n.X, x))
		}
		return c.not(x, n.At), nil
	}
	if !x.t.Kind.IsNumber() {
		return nil, errorf(n.At, "- wants a number, got %s", describe(n.X, x))
	}
	nd := &node{op: opNeg, t: x.t, pos: n.At, args: []*node{x}, untyped: x.untyped, unit: opaque(x)}
	return c.fold(nd), nil
}

func (c *checker) not(x *node, pos int) *node {
	if x.op == opNot {
		// not not x is x with nulls as false.
		return c.asCondition(x.args[0])
	}
	return c.fold(&node{op: opNot, t: Type{Kind: Bool}, pos: pos, args: []*node{x}})
}

// asCondition returns a bool node with nulls read as false.
func (c *checker) asCondition(nd *node) *node {
	if !nd.t.Nullable {
		return nd
	}
	return c.fold(&node{op: opAnd, t: Type{Kind: Bool}, pos: nd.pos, args: []*node{nd, constBool(true, nd.pos)}})
}

var arithOps = map[string]op{"+": opAdd, "-": opSub, "*": opMul, "/": opDiv, "%": opMod}
var cmpOps = map[string]op{"==": opEq, "!=": opNe, "<": opLt, "<=": opLe, ">": opGt, ">=": opGe}

func (c *checker) binary(n *Binary) (*node, error) {
	if n.Op == "in" || n.Op == "not in" {
		return c.in(n)
	}
	_, isCmp := cmpOps[n.Op]
	if isCmp {
		c.far = c.farUnit(n.X, n.Y)
	}
	x, err := c.value(n.X)
	if err != nil {
		return nil, err
	}
	if isCmp {
		c.far = c.farUnit(n.Y, n.X)
	}
	y, err := c.value(n.Y)
	if err != nil {
		return nil, err
	}
	switch n.Op {
	case "and", "or":
		for _, a := range [...]struct {
			n  Node
			nd *node
		}{{n.X, x}, {n.Y, y}} {
			if a.nd.t.Kind != Bool {
				return nil, errorf(n.At, "%s wants bools on both sides, got %s", n.Op, describe(a.n, a.nd))
			}
		}
		return c.logic(n.Op, x, y, n.At), nil
	}
	if o, ok := arithOps[n.Op]; ok {
		for _, a := range [...]struct {
			n  Node
			nd *node
		}{{n.X, x}, {n.Y, y}} {
			if !a.nd.t.Kind.IsNumber() {
				return nil, errorf(n.At, "%s wants numbers, got %s", n.Op, describe(a.n, a.nd))
			}
		}
		if o == opAdd || o == opSub {
			// ts - timestamp("2025-01-01") counts ts's unit.
			xy := []*node{x, y}
			if _, err := c.copyUnit(n.At, []Node{n.X, n.Y}, xy); err != nil {
				return nil, err
			}
			x, y = xy[0], xy[1]
		}
		unit := opaque(x, y) // a sum or difference of timestamps is no timestamp of theirs
		shifted := x.shifted || y.shifted
		if unit == 0 {
			unit = shiftedUnit(o, x, y) // timestamp("2025-11-20") + n counts nanoseconds
			shifted = shifted || unit == UnknownUnit
		}
		cu, instant := constArithUnit(o, x, y)
		untyped := x.untyped && y.untyped // literals only: the result adapts too
		x, y = c.unify(x, y)
		nd := &node{op: o, t: Type{Kind: x.t.Kind, Nullable: x.t.Nullable || y.t.Nullable}, pos: n.At, args: []*node{x, y}, unit: unit}
		nd.shifted = shifted && unit == UnknownUnit
		nd.untyped = untyped
		if (o == opDiv || o == opMod) && x.t.Kind.IsInt() && !(y.isConst() && y.constFloat64() != 0) {
			nd.t.Nullable = true // integer division by zero is null
		}
		if r := c.fold(nd); r.isConst() {
			r.unit, r.instant = cu, instant // timestamp("2025-11-20") - 86400000000000 is an instant still
			return r, nil
		}
		return nd, nil
	}
	o := cmpOps[n.Op]
	if x, y, err = c.sameUnit(n, x, y); err != nil {
		return nil, err
	}
	kx, ky := x.t.Kind, y.t.Kind
	switch {
	case kx.IsNumber() && ky.IsNumber():
		x, y = c.unify(x, y)
	case kx == String && ky == String:
	case kx == Bool && ky == Bool && (o == opEq || o == opNe):
	default:
		return nil, errorf(n.At, "cannot compare %s with %s", describe(n.X, x), describe(n.Y, y))
	}
	return c.fold(&node{op: o, t: Type{Kind: Bool}, pos: n.At, args: []*node{x, y}}), nil
}

// logic builds x and y, x or y, simplifying constant operands.
func (c *checker) logic(opText string, x, y *node, pos int) *node {
	o := opAnd
	if opText == "or" {
		o = opOr
	}
	if x.isConst() && !y.isConst() {
		x, y = y, x
	}
	if y.isConst() && !x.isConst() {
		isTrue := y.out.b[0] == 1 && !y.isNullConst()
		switch {
		case o == opAnd && isTrue, o == opOr && !isTrue:
			return c.asCondition(x)
		default:
			return constBool(isTrue, pos)
		}
	}
	return c.fold(&node{op: o, t: Type{Kind: Bool}, pos: pos, args: []*node{x, y}})
}

// unify converts two numeric operands to one kind. An untyped literal
// takes the other operand's kind (an integer literal that does not fit an
// int32 operand makes it int64; a float literal with an int operand makes
// both float64); typed operands follow promote.
func (c *checker) unify(x, y *node) (*node, *node) {
	kx, ky := x.t.Kind, y.t.Kind
	var k Kind
	switch {
	case x.untyped && y.untyped:
		k = promote(kx, ky)
	case x.untyped:
		k = adopt(x, ky)
	case y.untyped:
		k = adopt(y, kx)
	default:
		k = promote(kx, ky)
	}
	return c.convert(x, k), c.convert(y, k)
}

func adopt(lit *node, k Kind) Kind {
	switch {
	case lit.t.Kind == Int64 && k == Int32:
		if v := lit.out.i64[0]; v != int64(int32(v)) {
			return Int64
		}
		return Int32
	case lit.t.Kind == Float64 && k.IsInt():
		return Float64
	}
	return k
}

// convert returns nd as kind k: itself, a converted constant, or a cast.
func (c *checker) convert(nd *node, k Kind) *node {
	if nd.t.Kind == k {
		if nd.untyped {
			cp := *nd
			cp.untyped = false
			return &cp
		}
		return nd
	}
	t := Type{Kind: k, Nullable: nd.t.Nullable}
	if nd.t.Kind.IsFloat() && k.IsInt() {
		t.Nullable = true // NaN and out of range are null
	}
	if nd.null {
		return nullConst(k, nd.pos)
	}
	return c.fold(&node{op: opCast, t: t, pos: nd.pos, args: []*node{nd}, unit: castUnit(nd, k)})
}

// fold evaluates a node whose arguments are all constants, at compile
// time, and returns the constant; other nodes it returns as they are.
func (c *checker) fold(nd *node) *node {
	if c.noFold && !nd.untyped {
		// Untyped constants are folded always: their value decides the
		// kind they take (adopt).
		return nd
	}
	for _, a := range nd.args {
		if !a.isConst() {
			return nd
		}
	}
	if nd.op == opConst || nd.op == opCol {
		return nd
	}
	apply(nd, argVecs(nd), 1)
	k := &node{op: opConst, t: nd.t, pos: nd.pos, untyped: nd.untyped}
	k.out = nd.out
	k.out.cst = true
	// The result lives in nd's scratch; copy it so that k owns its value.
	k.out.b = append([]byte(nil), k.out.b...)
	k.out.i32 = append([]int32(nil), k.out.i32...)
	k.out.i64 = append([]int64(nil), k.out.i64...)
	k.out.f32 = append([]float32(nil), k.out.f32...)
	k.out.f64 = append([]float64(nil), k.out.f64...)
	k.out.u16 = append([]uint16(nil), k.out.u16...)
	k.out.data = append([]byte(nil), k.out.data...)
	k.out.off = append([]int64(nil), k.out.off...)
	if k.out.valid != nil {
		k.out.valid = []byte{k.out.valid[0]}
		if k.out.valid[0] == 1 {
			k.out.valid = nil
		}
	}
	return k
}

// argVecs returns the node's argument vectors when they are constants or
// already evaluated.
func argVecs(nd *node) []*vec {
	if len(nd.argv) != len(nd.args) {
		nd.argv = make([]*vec, len(nd.args))
	}
	for i, a := range nd.args {
		nd.argv[i] = &a.out
	}
	return nd.argv
}

// quoteList renders names as "a", "b" and "c".
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	if len(q) <= 1 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// farUnit is the unit a timestamp() without a unit that is operand t of
// a comparison with col counts when it does not fit nanoseconds: col's,
// where t is that call itself and col a timestamp column (0 otherwise).
func (c *checker) farUnit(t, col Node) int64 {
	call, ok := t.(*Call)
	id, isCol := col.(*Ident)
	if !ok || call.Func != "timestamp" || len(call.Args) != 1 || !isCol {
		return 0
	}
	if f, ok := c.schema.field(id.Name); ok && f.Unit > 1 {
		return f.Unit
	}
	return 0
}
