package expr

import (
	"fmt"
	"unsafe"

	"github.com/lastmile/lastmile/column"
)

// Expr is a compiled expression. It owns scratch vectors that grow to the
// largest batch it has seen and are reused, so an Expr must be used by one
// goroutine at a time; give each worker its own with Clone.
type Expr struct {
	src  string
	root *node
	cols []colRef
}

// colRef is an input column the expression reads, and its binding to the
// batch of the current call.
type colRef struct {
	name string
	t    Type // as the schema declared it

	hint  int            // index of the column in the last batch
	c     *column.Column // bound column of the current call
	full  vec            // all its rows, valid when ready
	ready bool
	conv  vec // buffers for columns widened on read (int8 → int32, ...)
}

// Compile parses src and checks it against schema.
func Compile(src string, schema Schema) (*Expr, error) {
	return compile(src, &checker{schema: schema})
}

func compile(src string, c *checker) (*Expr, error) {
	ast, err := Parse(src)
	if err != nil {
		return nil, err
	}
	root, err := c.any(ast)
	if err != nil {
		return nil, err
	}
	switch {
	case root.null:
		return nil, errorf(ast.Pos(), "the expression is null; it needs a type")
	case root.t.Kind == List:
		return nil, errorf(ast.Pos(), "%s can only be used in len() or is_null()", describe(ast, root))
	}
	root = c.convertUntyped(root)
	e := &Expr{src: ast.String(), root: root}
	// Keep the columns the checked tree still reads (folding may have
	// dropped some), numbered in order of first use.
	index := make(map[int]int)
	seen := make(map[*node]bool)
	walk(root, func(nd *node) {
		if nd.op != opCol || seen[nd] {
			return
		}
		seen[nd] = true
		i, ok := index[nd.col]
		if !ok {
			i = len(e.cols)
			index[nd.col] = i
			e.cols = append(e.cols, c.cols[nd.col])
		}
		nd.col = i
	})
	return e, nil
}

// walk calls f for nd and its descendants, parents first, arguments in
// order.
func walk(nd *node, f func(*node)) {
	f(nd)
	for _, a := range nd.args {
		walk(a, f)
	}
}

// String returns the expression as normalized source (as Parse's String).
func (e *Expr) String() string { return e.src }

// Type returns the type of the expression's values.
func (e *Expr) Type() Type { return e.root.t }

// Unit returns the unit of the expression's values where they are
// timestamps, as Field.Unit: the unit of the timestamp columns a copy of
// them counts (ts, if(c, ts, tb), fill_null(ts, ...), min, max, clip, a
// cast to int64 or float64), the unit a timestamp() or date() constant
// counts; UnknownUnit where they are computed from timestamps otherwise
// (arithmetic, beside a number of no unit); 0 for anything else. A column
// a map computes is given it, so that a later timestamp() compared with
// the column counts what the column holds.
func (e *Expr) Unit() int64 { return e.root.unit }

// Columns returns the input columns the expression reads, in order of
// first use, each once. Columns of subexpressions folded away at compile
// time (is_null of a non-nullable column) are not included.
func (e *Expr) Columns() []string {
	names := make([]string, len(e.cols))
	for i, c := range e.cols {
		names[i] = c.name
	}
	return names
}

// Clone returns an Expr that computes the same and shares no scratch
// with e, for use on another goroutine.
func (e *Expr) Clone() *Expr {
	cp := &Expr{src: e.src, root: cloneNode(e.root), cols: make([]colRef, len(e.cols))}
	for i, c := range e.cols {
		cp.cols[i] = colRef{name: c.name, t: c.t}
	}
	return cp
}

func cloneNode(nd *node) *node {
	cp := &node{
		op: nd.op, t: nd.t, pos: nd.pos, untyped: nd.untyped, null: nd.null,
		col: nd.col, set: nd.set, bounds: nd.bounds, mod: nd.mod, prefix: nd.prefix,
	}
	if nd.op == opConst {
		cp.out = nd.out // read-only
	}
	cp.args = make([]*node, len(nd.args))
	for i, a := range nd.args {
		cp.args[i] = cloneNode(a)
	}
	return cp
}

// bind finds the expression's columns in b and checks they have the
// types the expression was compiled for.
func (e *Expr) bind(b *column.Batch) error {
	for i := range e.cols {
		r := &e.cols[i]
		r.c, r.ready = nil, false
		if r.hint < len(b.Columns) && b.Columns[r.hint].Name == r.name {
			r.c = &b.Columns[r.hint]
		} else {
			for j := range b.Columns {
				if b.Columns[j].Name == r.name {
					r.c, r.hint = &b.Columns[j], j
					break
				}
			}
		}
		c := r.c
		if c == nil {
			return fmt.Errorf("expression %s: column %q is not in the batch", e.src, r.name)
		}
		t, err := ColumnType(c.Kind, c.DType, c.Width, c.Valid != nil)
		if err != nil || t.Kind != r.t.Kind {
			return fmt.Errorf("expression %s: column %q is %v %v in the batch, but the expression was compiled for %v",
				e.src, r.name, c.Kind, c.DType, r.t)
		}
		if c.Len != b.Rows {
			return fmt.Errorf("expression %s: column %q has %d rows, the batch %d", e.src, r.name, c.Len, b.Rows)
		}
		if err := checkShape(c); err != nil {
			return fmt.Errorf("expression %s: %w", e.src, err)
		}
		if !r.t.Nullable && c.Valid != nil && c.NullCount() > 0 {
			return fmt.Errorf("expression %s: column %q has nulls, but the expression was compiled for a non-nullable column", e.src, r.name)
		}
	}
	return nil
}

// checkShape makes sure the column's buffers are as long as its rows
// need, so that kernels can slice them without checks of their own (the
// O(1) part of column.Check). An empty Bytes or List column may lack its
// one offset, as column.Batch.Reset leaves it.
func checkShape(c *column.Column) error {
	n, size := c.Len, c.DType.Size()
	bad := false
	switch {
	case c.Kind == column.Fixed:
		bad = len(c.Data) < n*c.Width*size
	case n == 0 && len(c.Offsets) == 0:
	default:
		bad = len(c.Offsets) != n+1 || c.Offsets[0] < 0 || c.Offsets[n] < c.Offsets[0] || int64(len(c.Data)) < c.Offsets[n]*int64(size)
	}
	if bad || c.Valid != nil && len(c.Valid) < n {
		return fmt.Errorf("column %q is malformed: %d data bytes, %d offsets, %d validity bytes for %d rows", c.Name, len(c.Data), len(c.Offsets), len(c.Valid), n)
	}
	return nil
}

// zeroOffsets stands for the offsets of an empty column that has none.
var zeroOffsets = []int64{0}

// column returns all rows of bound column i as a vector.
func (e *Expr) column(i int) *vec {
	r := &e.cols[i]
	if r.ready {
		return &r.full
	}
	c, n := r.c, r.c.Len
	v := vec{kind: r.t.Kind}
	switch r.t.Kind {
	case Bool:
		v.b = c.Data[:n]
	case Int32:
		switch c.DType {
		case column.Int32:
			v.i32 = c.Int32s()[:n]
		default:
			r.conv.i32 = grow(r.conv.i32, n)
			v.i32 = r.conv.i32
			switch c.DType {
			case column.Int8:
				widen(v.i32, viewAs[int8](c.Data))
			case column.Int16:
				widen(v.i32, viewAs[int16](c.Data))
			case column.Uint8:
				widen(v.i32, c.Data)
			}
		}
	case Int64:
		v.i64 = c.Int64s()[:n]
	case Float32:
		switch c.DType {
		case column.Float32:
			v.f32 = c.Float32s()[:n]
		default:
			r.conv.f32 = grow(r.conv.f32, n)
			v.f32 = r.conv.f32
			src := viewAs[uint16](c.Data)[:n]
			if c.DType == column.BFloat16 {
				for j, h := range src {
					v.f32[j] = fromBFloat16(h)
				}
			} else {
				for j, h := range src {
					v.f32[j] = fromFloat16(h)
				}
			}
		}
	case Float64:
		v.f64 = c.Float64s()[:n]
	case String:
		v.data, v.off = c.Data, c.Offsets
	case List:
		if c.Kind == column.Fixed {
			v.width = c.Width
		} else {
			v.off = c.Offsets
		}
	}
	if (r.t.Kind == String || r.t.Kind == List && c.Kind != column.Fixed) && len(v.off) == 0 {
		v.off = zeroOffsets // read only
	}
	if r.t.Nullable && c.Valid != nil {
		v.valid = c.Valid[:n]
	}
	r.full, r.ready = v, true
	return &r.full
}

func widen[S int8 | int16 | uint8](out []int32, x []S) {
	x = x[:len(out)]
	for i, v := range x {
		out[i] = int32(v)
	}
}

// viewAs reinterprets bytes as a slice of T (little-endian hosts only, as
// the whole of lastmile's columnar format).
func viewAs[T any](b []byte) []T {
	var zero T
	n := len(b) / int(unsafe.Sizeof(zero))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// unsafeString views b as a string without copying; b must not change
// while the string is in use.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// asBytes is the inverse of viewAs.
func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(zero)))
}

func fromBFloat16(h uint16) float32 { return float32frombits(uint32(h) << 16) }

// ctx says which rows an evaluation computes: all n rows of the batch
// (sel nil), or the n rows listed in sel, compacted (row j of every
// vector is batch row sel[j]).
type ctx struct {
	n   int
	sel []int32
}

func (e *Expr) eval(nd *node, cx ctx) *vec {
	switch nd.op {
	case opConst:
		return &nd.out
	case opCol:
		full := e.column(nd.col)
		if cx.sel == nil {
			return full
		}
		gather(nd, full, cx.sel)
		return &nd.out
	}
	if len(nd.argv) != len(nd.args) {
		nd.argv = make([]*vec, len(nd.args))
	}
	for i, a := range nd.args {
		nd.argv[i] = e.eval(a, cx)
	}
	apply(nd, nd.argv, cx.n)
	return &nd.out
}

// gather sets nd.out to the rows sel of full.
func gather(nd *node, full *vec, sel []int32) {
	n := len(sel)
	switch full.kind {
	case Bool:
		gatherT(nd.outBool(n), full.b, sel)
	case Int32:
		gatherT(nd.outI32(n), full.i32, sel)
	case Int64:
		gatherT(nd.outI64(n), full.i64, sel)
	case Float32:
		gatherT(nd.outF32(n), full.f32, sel)
	case Float64:
		gatherT(nd.outF64(n), full.f64, sel)
	case String, List:
		nd.out = vec{kind: full.kind, width: full.width}
		if full.off != nil {
			off := grow(nd.own.off, n+1)
			data := nd.own.data[:0]
			off[0] = 0
			for j, i := range sel {
				lo, hi := full.off[i], full.off[i+1]
				if full.kind == String {
					data = append(data, full.data[lo:hi]...)
					off[j+1] = int64(len(data))
				} else {
					off[j+1] = off[j] + hi - lo
				}
			}
			nd.own.off, nd.own.data = off, data
			nd.out.off, nd.out.data = off, data
		}
	}
	if full.valid != nil {
		v := nd.ownValid(n)
		gatherT(v, full.valid, sel)
	}
}

func gatherT[T any](out, src []T, sel []int32) {
	sel = sel[:len(out)]
	for j, i := range sel {
		out[j] = src[i]
	}
}
