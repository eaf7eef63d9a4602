package expr

import (
	"fmt"
	"math"

	"github.com/lastmile/lastmile/column"
)

// Filter appends to sel[:0] the indexes of the rows of b where the
// expression, which must be of type bool, is true (null counts as false),
// in ascending order, and returns the extended slice.
//
// The and, or and not of a filter work on selection vectors, lists of
// row indexes. The right side of an and is evaluated only for the rows
// its left side kept, the right side of an or only for the rows its left
// side rejected: when those are few, on vectors gathered from just those
// rows; when they are many, over every row, which costs less than the
// gather. So a cheap, selective test written first spares the rows it
// decides from the expensive tests after it.
func (e *Expr) Filter(b *column.Batch, sel []int32) ([]int32, error) {
	if e.root.t.Kind != Bool {
		return sel[:0], fmt.Errorf("expression %s is %v, a filter needs bool", e.src, e.root.t)
	}
	if b.Rows > math.MaxInt32 {
		return sel[:0], fmt.Errorf("expression %s: batch of %d rows is too long to filter", e.src, b.Rows)
	}
	if err := e.bind(b); err != nil {
		return sel[:0], err
	}
	return e.filter(e.root, b.Rows, nil, sel[:0], 1), nil
}

// filter appends to dst the rows of in (all n rows when in is nil) where
// nd is true (want 1) or where it is false or null (want 0), in order.
// dst must not share memory with in.
func (e *Expr) filter(nd *node, n int, in, dst []int32, want byte) []int32 {
	switch nd.op {
	case opConst:
		if b2u(nd.out.b[0] == 1 && !nd.isNullConst()) != want {
			return dst
		}
		return appendRows(dst, n, in)
	case opNot:
		return e.filter(nd.args[0], n, in, dst, want^1)
	case opAnd, opOr:
		// not (a and b) is (not a) or (not b); not (a or b) is (not a)
		// and (not b).
		if (nd.op == opAnd) == (want == 1) {
			return e.filterAll(nd, n, in, dst, want)
		}
		return e.filterAny(nd, n, in, dst, want)
	}
	if in == nil {
		return appendWhere(dst, e.eval(nd, ctx{n: n}), nil, n, want)
	}
	if 2*len(in) >= n {
		// Dense enough: evaluating every row costs less than gathering.
		return appendWhereAt(dst, e.eval(nd, ctx{n: n}), in, want)
	}
	return appendWhere(dst, e.eval(nd, ctx{n: len(in), sel: in}), in, len(in), want)
}

// filterAll appends the rows where both arguments of nd give want.
func (e *Expr) filterAll(nd *node, n int, in, dst []int32, want byte) []int32 {
	l := e.filter(nd.args[0], n, in, nd.sel[0][:0], want)
	nd.sel[0] = l
	if len(l) == 0 {
		return dst
	}
	return e.filter(nd.args[1], n, l, dst, want)
}

// filterAny appends the rows where either argument of nd gives want.
func (e *Expr) filterAny(nd *node, n int, in, dst []int32, want byte) []int32 {
	l := e.filter(nd.args[0], n, in, nd.sel[0][:0], want)
	nd.sel[0] = l
	total := n
	if in != nil {
		total = len(in)
	}
	rest := total - len(l)
	switch {
	case rest == 0:
		return append(dst, l...)
	case 2*rest < n:
		// Few rows left: test the right side on those only.
		r := difference(nd.sel[1][:0], n, in, l, &nd.tmp[0])
		nd.sel[1] = r
		r2 := e.filter(nd.args[1], n, r, nd.sel[2][:0], want)
		nd.sel[2] = r2
		return merge(dst, l, r2)
	}
	// Many rows left: evaluate the right side on every row into a mask,
	// mark the rows the left side gave, and collect.
	m := copyWhere(&nd.tmp[0], e.eval(nd.args[1], ctx{n: n}), n, want)
	for _, i := range l {
		m[i] = 1
	}
	v := vec{kind: Bool, b: m}
	if in == nil {
		return appendWhere(dst, &v, nil, n, 1)
	}
	return appendWhereAt(dst, &v, in, 1)
}

func appendRows(dst []int32, n int, in []int32) []int32 {
	if in != nil {
		return append(dst, in...)
	}
	for i := 0; i < n; i++ {
		dst = append(dst, int32(i))
	}
	return dst
}

// isWant returns 1 where bool vector v is want: for want 1 where it is
// true and valid, for want 0 where it is false or null.
func isWant(b, valid byte, want byte) byte { return (b & valid) ^ want ^ 1 }

// copyWhere writes to *buf, grown to n, 1 where the bool vector v is want
// and 0 elsewhere, and returns it.
func copyWhere(buf *[]byte, v *vec, n int, want byte) []byte {
	m := grow(*buf, n)
	*buf = m
	switch {
	case v.cst:
		x := isWant(v.b[0], validAt(v.valid, 0), want)
		for i := range m {
			m[i] = x
		}
	case v.valid == nil:
		for i, b := range v.b[:n] {
			m[i] = b ^ want ^ 1
		}
	default:
		valid := v.valid[:n]
		for i, b := range v.b[:n] {
			m[i] = isWant(b, valid[i], want)
		}
	}
	return m
}

// appendWhere appends row i (or in[i]) for every row of v, of length n,
// that is want.
func appendWhere(dst []int32, v *vec, in []int32, n int, want byte) []int32 {
	if v.cst {
		if isWant(v.b[0], validAt(v.valid, 0), want) == 0 {
			return dst
		}
		return appendRows(dst, n, in)
	}
	start := len(dst)
	dst = grow(dst, start+n)
	k := start
	b := v.b[:n]
	flip := want ^ 1
	if v.valid != nil {
		valid := v.valid[:n]
		for i, t := range b {
			dst[k] = int32(i)
			k += int((t & valid[i]) ^ flip)
		}
	} else {
		for i, t := range b {
			dst[k] = int32(i)
			k += int(t ^ flip)
		}
	}
	dst = dst[:k]
	if in != nil {
		for p := start; p < k; p++ {
			dst[p] = in[dst[p]]
		}
	}
	return dst
}

// appendWhereAt appends the rows of in where the full-length v is want.
func appendWhereAt(dst []int32, v *vec, in []int32, want byte) []int32 {
	if v.cst {
		return appendWhere(dst, v, in, len(in), want)
	}
	start := len(dst)
	dst = grow(dst, start+len(in))
	k := start
	flip := want ^ 1
	if v.valid == nil {
		for _, i := range in {
			dst[k] = i
			k += int(v.b[i] ^ flip)
		}
	} else {
		for _, i := range in {
			dst[k] = i
			k += int((v.b[i] & v.valid[i]) ^ flip)
		}
	}
	return dst[:k]
}

func validAt(valid []byte, i int) byte {
	if valid == nil {
		return 1
	}
	return valid[i]
}

// difference appends to dst the rows of in (all n rows when nil) that are
// not in x, a sorted subset of in. mask is scratch.
func difference(dst []int32, n int, in, x []int32, mask *[]byte) []int32 {
	if in == nil {
		m := grow(*mask, n)
		*mask = m
		for i := range m {
			m[i] = 1
		}
		for _, i := range x {
			m[i] = 0
		}
		v := vec{kind: Bool, b: m}
		return appendWhere(dst, &v, nil, n, 1)
	}
	j := 0
	for _, i := range in {
		if j < len(x) && x[j] == i {
			j++
			continue
		}
		dst = append(dst, i)
	}
	return dst
}

// merge appends the union of the disjoint sorted a and b to dst, sorted.
func merge(dst, a, b []int32) []int32 {
	for len(a) > 0 && len(b) > 0 {
		if a[0] < b[0] {
			dst, a = append(dst, a[0]), a[1:]
		} else {
			dst, b = append(dst, b[0]), b[1:]
		}
	}
	dst = append(dst, a...)
	return append(dst, b...)
}
