package expr

import "math"

// op is what a checked node computes.
type op uint8

const (
	opConst op = iota
	opCol
	opCast // args[0] converted to t.Kind
	opNeg
	opAdd
	opSub
	opMul
	opDiv
	opMod
	opEq
	opNe
	opLt
	opLe
	opGt
	opGe
	opIn
	opNotIn
	opAnd
	opOr
	opNot
	opIsNull
	opFillNull
	opIf
	opStartsWith
	opLog1p
	opLog
	opExp
	opSqrt
	opAbs
	opMin
	opMax
	opBucketize
	opHashMod
	opLen
)

var opNames = [...]string{
	opConst: "const", opCol: "col", opCast: "cast", opNeg: "-",
	opAdd: "+", opSub: "-", opMul: "*", opDiv: "/", opMod: "%",
	opEq: "==", opNe: "!=", opLt: "<", opLe: "<=", opGt: ">", opGe: ">=",
	opIn: "in", opNotIn: "not in", opAnd: "and", opOr: "or", opNot: "not",
	opIsNull: "is_null", opFillNull: "fill_null", opIf: "if",
	opStartsWith: "starts_with", opLog1p: "log1p", opLog: "log", opExp: "exp",
	opSqrt: "sqrt", opAbs: "abs", opMin: "min", opMax: "max",
	opBucketize: "bucketize", opHashMod: "hash_mod", opLen: "len",
}

func (o op) String() string { return opNames[o] }

// swap returns the comparison that gives the same result with its
// operands exchanged: a < b is b > a.
func (o op) swap() op {
	switch o {
	case opLt:
		return opGt
	case opLe:
		return opGe
	case opGt:
		return opLt
	case opGe:
		return opLe
	}
	return o
}

// node is a node of a checked expression: its operation, result type and
// arguments, the parameters the operation needs, and the scratch vectors
// it evaluates into. Each node owns its scratch, so an evaluation never
// overwrites a vector another node still reads.
type node struct {
	op   op
	t    Type
	pos  int // source offset, for messages
	args []*node

	// untyped marks a numeric literal (or a constant computed from
	// literals only) that still adapts to the kind of the operand it meets.
	untyped bool
	// null marks the null literal; it gets a kind where if() meets it.
	null bool

	col    int     // opCol: index in Expr.cols
	set    inSet   // opIn, opNotIn
	bounds bounds  // opBucketize
	mod    divisor // opHashMod
	prefix string  // opStartsWith

	// unit is the nanoseconds a value counts: a timestamp column's
	// (Field.Unit), or a timestamp() constant's; 0 elsewhere. instant
	// marks a timestamp() without a unit: its value is nanoseconds until
	// a comparison with a timestamp column converts it (timefn.go).
	unit    int64
	instant bool
	// counted marks an instant already counted in unit, rounded down
	// (one too far from 1970 for nanoseconds, taken where a comparison
	// with a coarser timestamp column asked for it); between marks one
	// that fell between two counts.
	counted, between bool
	// shifted marks a value of UnknownUnit computed from a timestamp()
	// constant and a column (timestamp(...) * n): compared with a
	// timestamp column it is an error, as the constant alone would be,
	// where one computed from columns alone (ms * 1000) is taken at its word.
	shifted bool

	out  vec        // the result; opConst keeps its value here (cst)
	own  vec        // buffers the node owns; out's slices point into them
	argv []*vec     // evaluated arguments, reused
	tmp  [4][]byte  // scratch masks (plainBool, spread constants, ones)
	sel  [3][]int32 // scratch selections (Filter of and, or, not)
}

// vec is a column of values being computed. One of the typed slices is in
// use, as Kind says. A cst vec holds one value that stands for every row.
// Null slots hold arbitrary values (kernels must not trap on them) except
// in bool vectors, whose data is always 0 or 1.
type vec struct {
	kind  Kind
	cst   bool
	b     []byte // Bool: 0 or 1
	i32   []int32
	i64   []int64
	f32   []float32
	f64   []float64
	u16   []uint16 // BFloat16 bit patterns
	off   []int64  // String and List: rows+1 offsets (nil for a fixed-width list)
	data  []byte   // String bytes
	width int      // List stored as a Fixed column: elements per row
	valid []byte   // nil when every row is valid; else 1 valid, 0 null
}

func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n, n+n/8)
}

// Result vectors. Each makes the node's out a vector of n values of the
// node's kind backed by its own buffers, with no nulls yet.

func (nd *node) outBool(n int) []byte {
	nd.own.b = grow(nd.own.b, n)
	nd.out = vec{kind: Bool, b: nd.own.b}
	return nd.out.b
}

func (nd *node) outI32(n int) []int32 {
	nd.own.i32 = grow(nd.own.i32, n)
	nd.out = vec{kind: Int32, i32: nd.own.i32}
	return nd.out.i32
}

func (nd *node) outI64(n int) []int64 {
	nd.own.i64 = grow(nd.own.i64, n)
	nd.out = vec{kind: Int64, i64: nd.own.i64}
	return nd.out.i64
}

func (nd *node) outF32(n int) []float32 {
	nd.own.f32 = grow(nd.own.f32, n)
	nd.out = vec{kind: Float32, f32: nd.own.f32}
	return nd.out.f32
}

func (nd *node) outF64(n int) []float64 {
	nd.own.f64 = grow(nd.own.f64, n)
	nd.out = vec{kind: Float64, f64: nd.own.f64}
	return nd.out.f64
}

func (nd *node) outU16(n int) []uint16 {
	nd.own.u16 = grow(nd.own.u16, n)
	nd.out = vec{kind: BFloat16, u16: nd.own.u16}
	return nd.out.u16
}

// ownValid returns a validity buffer of n bytes the node owns (contents
// undefined) and installs it as out.valid.
func (nd *node) ownValid(n int) []byte {
	nd.own.valid = grow(nd.own.valid, n)
	nd.out.valid = nd.own.valid
	return nd.out.valid
}

// andValid sets out.valid to the rows valid in both a and b: nil when
// both have no nulls, the other's mask when one has none (borrowed: it is
// never written), a fresh AND otherwise.
func (nd *node) andValid(n int, a, b []byte) {
	switch {
	case a == nil:
		nd.out.valid = b
	case b == nil:
		nd.out.valid = a
	default:
		v := nd.ownValid(n)
		a, b = a[:n], b[:n]
		for i := range v {
			v[i] = a[i] & b[i]
		}
	}
}

// validOf returns the validity to combine for an argument: a cst vector
// has one slot, which stands for every row.
func validOf(v *vec, n int, scratch *[]byte) []byte {
	if v.valid == nil || !v.cst {
		return v.valid
	}
	// A null constant: only folded if() branches and fill_null values get
	// here; spread it.
	s := grow(*scratch, n)
	*scratch = s
	for i := range s {
		s[i] = v.valid[0]
	}
	return s
}

// Constants.

func constOf(t Type, pos int) *node {
	nd := &node{op: opConst, t: t, pos: pos}
	nd.out = vec{kind: t.Kind, cst: true}
	switch t.Kind {
	case Bool:
		nd.out.b = make([]byte, 1)
	case Int32:
		nd.out.i32 = make([]int32, 1)
	case Int64:
		nd.out.i64 = make([]int64, 1)
	case Float32:
		nd.out.f32 = make([]float32, 1)
	case Float64:
		nd.out.f64 = make([]float64, 1)
	case BFloat16:
		nd.out.u16 = make([]uint16, 1)
	case String:
		nd.out.off = []int64{0, 0}
	}
	return nd
}

func constInt(v int64, pos int) *node {
	nd := constOf(Type{Kind: Int64}, pos)
	nd.out.i64[0] = v
	return nd
}

func constFloat(v float64, pos int) *node {
	nd := constOf(Type{Kind: Float64}, pos)
	nd.out.f64[0] = v
	return nd
}

func constBool(v bool, pos int) *node {
	nd := constOf(Type{Kind: Bool}, pos)
	if v {
		nd.out.b[0] = 1
	}
	return nd
}

func constString(s string, pos int) *node {
	nd := constOf(Type{Kind: String}, pos)
	nd.out.data = []byte(s)
	nd.out.off[1] = int64(len(s))
	return nd
}

// nullConst is a null of kind k (from null in an if() branch).
func nullConst(k Kind, pos int) *node {
	nd := constOf(Type{Kind: k, Nullable: true}, pos)
	nd.out.valid = []byte{0}
	return nd
}

func (nd *node) isConst() bool { return nd.op == opConst }

// isNullConst reports a constant whose one value is null.
func (nd *node) isNullConst() bool {
	return nd.op == opConst && (nd.null || nd.out.valid != nil && nd.out.valid[0] == 0)
}

// constFloat64 returns a numeric constant's value as a float64.
func (nd *node) constFloat64() float64 {
	v := &nd.out
	switch v.kind {
	case Int32:
		return float64(v.i32[0])
	case Int64:
		return float64(v.i64[0])
	case Float32:
		return float64(v.f32[0])
	case Float64:
		return v.f64[0]
	case Bool:
		return float64(v.b[0])
	}
	return math.NaN()
}

// constInt64 returns an integer constant's value.
func (nd *node) constInt64() (int64, bool) {
	switch nd.out.kind {
	case Int32:
		return int64(nd.out.i32[0]), true
	case Int64:
		return nd.out.i64[0], true
	}
	return 0, false
}

func (nd *node) constString() string {
	return string(nd.out.data[nd.out.off[0]:nd.out.off[1]])
}
