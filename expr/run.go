package expr

import (
	"fmt"
	"math"

	"github.com/lastmile/lastmile/column"
)

// Eval computes the expression for every row of b into out, reusing out's
// buffers. It sets out's Kind (Fixed, or Bytes for strings), DType (the
// result Kind's DType), Width 1, Len, Data, Offsets and Valid, and leaves
// Name alone. out.Valid is non-nil exactly when Type().Nullable; null rows
// hold zeros (or are empty strings), as column.Column requires.
//
// out must not share memory with b's columns.
func (e *Expr) Eval(b *column.Batch, out *column.Column) error {
	if err := e.bind(b); err != nil {
		return err
	}
	n := b.Rows
	v := e.eval(e.root, ctx{n: n})
	writeColumn(out, v, e.root.t, n)
	return nil
}

func writeColumn(out *column.Column, v *vec, t Type, n int) {
	out.Kind, out.DType, out.Width, out.Len = column.Fixed, t.Kind.DType(), 1, n
	out.Offsets = out.Offsets[:0]
	if t.Kind == String {
		out.Kind, out.Width = column.Bytes, 0
		writeStrings(out, v, n)
	} else {
		out.Offsets = nil
		size := out.DType.Size()
		out.Data = column.Grow(out.Data, n*size)
		switch t.Kind {
		case Bool:
			fill(out.Data, v.b, v.cst)
		case Int32:
			fill(viewAs[int32](out.Data), v.i32, v.cst)
		case Int64:
			fill(viewAs[int64](out.Data), v.i64, v.cst)
		case Float32:
			fill(viewAs[float32](out.Data), v.f32, v.cst)
		case Float64:
			fill(viewAs[float64](out.Data), v.f64, v.cst)
		case BFloat16:
			fill(viewAs[uint16](out.Data), v.u16, v.cst)
		}
	}
	if !t.Nullable {
		out.Valid = nil
		return
	}
	out.Valid = column.Grow(out.Valid, n)
	if out.Valid == nil {
		out.Valid = []byte{} // non-nil: the type is nullable
	}
	switch {
	case v.valid == nil:
		for i := range out.Valid {
			out.Valid[i] = 1
		}
	case v.cst:
		fill(out.Valid, v.valid, true)
	default:
		copy(out.Valid, v.valid[:n])
	}
	if t.Kind != String {
		size := out.DType.Size()
		for i, ok := range out.Valid {
			if ok == 0 {
				clear(out.Data[i*size : (i+1)*size])
			}
		}
	}
}

// fill copies n = len(dst) values, or spreads a constant.
func fill[T any](dst, src []T, cst bool) {
	if cst {
		c := src[0]
		for i := range dst {
			dst[i] = c
		}
		return
	}
	copy(dst, src[:len(dst)])
}

func writeStrings(out *column.Column, v *vec, n int) {
	off := out.Offsets
	if cap(off) < n+1 {
		off = make([]int64, n+1, n+1+n/8)
	}
	off = off[:n+1]
	null := func(i int) bool { return v.valid != nil && v.valid[min(i, len(v.valid)-1)] == 0 }
	if v.cst {
		s := v.data[v.off[0]:v.off[1]]
		if null(0) {
			s = nil
		}
		out.Data = column.Grow(out.Data, n*len(s))
		for i := 0; i < n; i++ {
			copy(out.Data[i*len(s):], s)
			off[i+1] = int64((i + 1) * len(s))
		}
		out.Offsets = off
		return
	}
	base := v.off[0]
	total := v.off[n] - base
	out.Data = column.Grow(out.Data, int(total))
	copy(out.Data, v.data[base:v.off[n]])
	for i := 0; i <= n; i++ {
		off[i] = v.off[i] - base
	}
	out.Offsets = off
	// Null rows of the vectors this package builds are empty already;
	// a column with a non-empty null row breaks column's contract, which
	// is not repaired here.
}

// Filter appends to sel[:0] the indexes of the rows of b where the
// expression, which must be of type bool, is true (null counts as false),
// in ascending order, and returns the extended slice.
//
// The and, or and not of a filter narrow a selection vector: the right
// side of an and is evaluated only for the rows the left side kept (on
// those rows gathered into short vectors when they are few), the right
// side of an or only for the rows the left side rejected.
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
	return e.filter(e.root, b.Rows, nil, sel[:0]), nil
}

// filter appends to dst the rows of in (all n rows when in is nil) where
// nd is true. dst must not share memory with in.
func (e *Expr) filter(nd *node, n int, in, dst []int32) []int32 {
	switch nd.op {
	case opConst:
		if nd.out.b[0] == 0 || nd.isNullConst() {
			return dst
		}
		return appendRows(dst, n, in)
	case opAnd:
		l := e.filter(nd.args[0], n, in, nd.sel[0][:0])
		nd.sel[0] = l
		if len(l) == 0 {
			return dst
		}
		return e.filter(nd.args[1], n, l, dst)
	case opOr:
		l := e.filter(nd.args[0], n, in, nd.sel[0][:0])
		nd.sel[0] = l
		rest := difference(nd.sel[1][:0], n, in, l)
		nd.sel[1] = rest
		if len(rest) == 0 {
			return append(dst, l...)
		}
		r := e.filter(nd.args[1], n, rest, nd.sel[2][:0])
		nd.sel[2] = r
		return merge(dst, l, r)
	case opNot:
		x := e.filter(nd.args[0], n, in, nd.sel[0][:0])
		nd.sel[0] = x
		return difference(dst, n, in, x)
	}
	if in == nil {
		v := e.eval(nd, ctx{n: n})
		return appendTrue(dst, v, nil, n)
	}
	if 2*len(in) >= n {
		// Dense enough: evaluating every row costs less than gathering.
		v := e.eval(nd, ctx{n: n})
		return appendTrueAt(dst, v, in)
	}
	v := e.eval(nd, ctx{n: len(in), sel: in})
	return appendTrue(dst, v, in, len(in))
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

// appendTrue appends row i (or in[i]) for every true, valid row of v.
func appendTrue(dst []int32, v *vec, in []int32, n int) []int32 {
	if v.cst {
		if v.b[0] == 0 || v.valid != nil && v.valid[0] == 0 {
			return dst
		}
		return appendRows(dst, n, in)
	}
	start := len(dst)
	dst = grow(dst, start+n)
	k := start
	b := v.b[:n]
	if v.valid != nil {
		valid := v.valid[:n]
		for i, t := range b {
			dst[k] = int32(i)
			k += int(t & valid[i])
		}
	} else {
		for i, t := range b {
			dst[k] = int32(i)
			k += int(t)
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

// appendTrueAt appends the rows of in where the full-length v is true.
func appendTrueAt(dst []int32, v *vec, in []int32) []int32 {
	for _, i := range in {
		if v.b[i]&validAt(v.valid, int(i)) != 0 {
			dst = append(dst, i)
		}
	}
	return dst
}

func validAt(valid []byte, i int) byte {
	if valid == nil {
		return 1
	}
	return valid[i]
}

// difference appends to dst the rows of in (all n rows when nil) that are
// not in x, a sorted subset of in.
func difference(dst []int32, n int, in, x []int32) []int32 {
	j := 0
	if in == nil {
		for i := 0; i < n; i++ {
			if j < len(x) && x[j] == int32(i) {
				j++
				continue
			}
			dst = append(dst, int32(i))
		}
		return dst
	}
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

func float32frombits(b uint32) float32 { return math.Float32frombits(b) }

// fromFloat16 converts an IEEE-754 half to float32 (exactly).
func fromFloat16(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf, NaN
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
	case frac == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal half: a normal float32.
	f := float32(frac) / (1 << 24)
	if sign != 0 {
		f = -f
	}
	return f
}
