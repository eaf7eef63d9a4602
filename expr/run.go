package expr

import (
	"math"

	"github.com/lastmile/lastmile/column"
)

// Eval computes the expression for every row of b into out, reusing out's
// buffers. It sets out's Kind (Fixed, or Bytes for strings), DType (the
// result Kind's DType), Width 1, Len, Data, Offsets and Valid, and leaves
// Name alone. out.Valid is non-nil exactly when Type().Nullable; null rows
// hold zeros (or are empty strings), as column.Column requires.
//
// out may be one of b's columns, for a map that replaces a column: every
// input is read before out is written.
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
