package expr

import (
	"math"
	"math/bits"
	"strings"
)

// The loops of this file are the hot path. Each runs over whole vectors
// with the operation chosen outside the loop; cst arguments get their own
// loop (x op c, c op x), so a comparison with a literal reads one column
// and writes one byte per row. With both arguments cst (constant folding,
// n = 1) the x-op-c loop applies.

type number interface {
	~int32 | ~int64 | ~float32 | ~float64
}

type integer interface{ ~int32 | ~int64 }

type float interface{ ~float32 | ~float64 }

// b2u converts a bool to 0 or 1 without a branch.
func b2u(b bool) byte {
	var u byte
	if b {
		u = 1
	}
	return u
}

// arith computes out = x o y for o in + - * (and / for floats).
func arith[T number](o op, out, x, y []T, xc, yc bool) {
	n := len(out)
	switch {
	case yc:
		c, x := y[0], x[:n]
		switch o {
		case opAdd:
			for i, v := range x {
				out[i] = v + c
			}
		case opSub:
			for i, v := range x {
				out[i] = v - c
			}
		case opMul:
			for i, v := range x {
				out[i] = v * c
			}
		case opDiv:
			for i, v := range x {
				out[i] = v / c
			}
		}
	case xc:
		c, y := x[0], y[:n]
		switch o {
		case opAdd:
			for i, v := range y {
				out[i] = c + v
			}
		case opSub:
			for i, v := range y {
				out[i] = c - v
			}
		case opMul:
			for i, v := range y {
				out[i] = c * v
			}
		case opDiv:
			for i, v := range y {
				out[i] = c / v
			}
		}
	default:
		x, y := x[:n], y[:n]
		switch o {
		case opAdd:
			for i := range out {
				out[i] = x[i] + y[i]
			}
		case opSub:
			for i := range out {
				out[i] = x[i] - y[i]
			}
		case opMul:
			for i := range out {
				out[i] = x[i] * y[i]
			}
		case opDiv:
			for i := range out {
				out[i] = x[i] / y[i]
			}
		}
	}
}

// fmod computes the floored remainder x - floor(x/y)*y (Python's %): its
// sign is the divisor's. y == 0 gives NaN.
func fmod[T float](out, x, y []T, xc, yc bool) {
	for i := range out {
		a, b := x[0], y[0]
		if !xc {
			a = x[i]
		}
		if !yc {
			b = y[i]
		}
		r := math.Mod(float64(a), float64(b))
		if r != 0 && (r < 0) != (b < 0) {
			r += float64(b)
		}
		out[i] = T(r)
	}
}

// idiv computes floored integer division (o == opDiv: Python's //) or
// the floored remainder (opMod: Python's %) and clears valid where the
// divisor is 0. valid has been filled with the operands' validity.
func idiv[T integer](o op, out, x, y []T, xc, yc bool, valid []byte) {
	n := len(out)
	if yc && !xc && y[0] > 0 {
		idivConst(o, out, x[:n], y[0])
		return
	}
	for i := range out {
		a, b := x[0], y[0]
		if !xc {
			a = x[i]
		}
		if !yc {
			b = y[i]
		}
		if b == 0 {
			out[i], valid[i] = 0, 0
			continue
		}
		q, r := a/b, a%b
		if r != 0 && (r^b) < 0 {
			q, r = q-1, r+b
		}
		if o == opDiv {
			out[i] = q
		} else {
			out[i] = r
		}
	}
}

// idivConst divides by a positive constant with a multiply and shifts
// (divisor) instead of a hardware division per row, without branches on
// the sign: |a| is divided, and the floored result rebuilt from it.
func idivConst[T integer](o op, out, x []T, d T) {
	dv := newDivisor(uint64(d))
	ud, m, sh := uint64(d), dv.magic, uint(dv.shift)&63
	x = x[:len(out)]
	div := o == opDiv
	switch {
	case m == 0:
		for i, a := range x {
			s, ua := absBits(int64(a))
			out[i] = T(floored(div, s, ua, ua>>sh, ud))
		}
	case dv.add:
		for i, a := range x {
			s, ua := absBits(int64(a))
			t, _ := bits.Mul64(m, ua)
			out[i] = T(floored(div, s, ua, (((ua-t)>>1)+t)>>sh, ud))
		}
	default:
		for i, a := range x {
			s, ua := absBits(int64(a))
			t, _ := bits.Mul64(m, ua)
			out[i] = T(floored(div, s, ua, t>>sh, ud))
		}
	}
}

// absBits returns all ones for a negative a (0 otherwise) and |a|.
func absBits(a int64) (s, abs uint64) {
	s = uint64(a >> 63)
	return s, (uint64(a) ^ s) - s
}

// floored returns the floored quotient (div) or remainder of a by d, from
// a's sign mask s, |a| and |a| / d.
func floored(div bool, s, ua, uq, d uint64) uint64 {
	ur := ua - uq*d
	// a < 0: q = -uq - 1 and r = d - ur, unless ur == 0.
	adj := s & -uint64(b2u(ur != 0))
	if div {
		return (uq ^ s) - s + adj
	}
	return (ur ^ s) - s + d&adj
}

// divisor divides uint64s by a constant d >= 1 with a 64x64→128-bit
// multiply (Granlund and Montgomery, as libdivide's u64 algorithm does).
type divisor struct {
	d     uint64
	magic uint64 // 0: d is a power of two, divide by shifting
	shift uint8
	add   bool // the 65-bit magic variant: add back n before shifting
}

func newDivisor(d uint64) divisor {
	if d == 0 {
		panic("BUG: divisor 0")
	}
	log2 := uint8(63 - bits.LeadingZeros64(d))
	if d&(d-1) == 0 {
		return divisor{d: d, shift: log2}
	}
	m, rem := bits.Div64(uint64(1)<<log2, 0, d)
	dv := divisor{d: d, shift: log2}
	if e := d - rem; e >= uint64(1)<<log2 {
		m += m
		twice := rem + rem
		if twice >= d || twice < rem {
			m++
		}
		dv.add = true
	}
	dv.magic = m + 1
	return dv
}

func (dv *divisor) div(n uint64) uint64 {
	sh := uint(dv.shift) & 63
	if dv.magic == 0 {
		return n >> sh
	}
	q, _ := bits.Mul64(dv.magic, n)
	if dv.add {
		return (((n - q) >> 1) + q) >> sh
	}
	return q >> sh
}

func (dv *divisor) mod(n uint64) uint64 { return n - dv.div(n)*dv.d }

// compare computes out = x o y, 1 or 0 per row.
func compare[T number](o op, out []byte, x, y []T, xc, yc bool) {
	if xc && !yc {
		x, y, xc, yc, o = y, x, false, true, o.swap()
	}
	n := len(out)
	if yc {
		c, x := y[0], x[:n]
		switch o {
		case opEq:
			for i, v := range x {
				out[i] = b2u(v == c)
			}
		case opNe:
			for i, v := range x {
				out[i] = b2u(v != c)
			}
		case opLt:
			for i, v := range x {
				out[i] = b2u(v < c)
			}
		case opLe:
			for i, v := range x {
				out[i] = b2u(v <= c)
			}
		case opGt:
			for i, v := range x {
				out[i] = b2u(v > c)
			}
		case opGe:
			for i, v := range x {
				out[i] = b2u(v >= c)
			}
		}
		return
	}
	x, y = x[:n], y[:n]
	switch o {
	case opEq:
		for i := range out {
			out[i] = b2u(x[i] == y[i])
		}
	case opNe:
		for i := range out {
			out[i] = b2u(x[i] != y[i])
		}
	case opLt:
		for i := range out {
			out[i] = b2u(x[i] < y[i])
		}
	case opLe:
		for i := range out {
			out[i] = b2u(x[i] <= y[i])
		}
	case opGt:
		for i := range out {
			out[i] = b2u(x[i] > y[i])
		}
	case opGe:
		for i := range out {
			out[i] = b2u(x[i] >= y[i])
		}
	}
}

// compareStrings compares strings byte-wise (bytes.Compare order).
func compareStrings(o op, out []byte, x, y *vec) {
	if x.cst && !y.cst {
		x, y, o = y, x, o.swap()
	}
	xo := x.off[:len(out)+1]
	if y.cst {
		c := unsafeString(y.data[y.off[0]:y.off[1]])
		switch o {
		case opEq, opNe:
			flip := b2u(o == opNe)
			n := int64(len(c))
			for i := range out {
				lo, hi := xo[i], xo[i+1]
				eq := hi-lo == n && string(x.data[lo:hi]) == c
				out[i] = b2u(eq) ^ flip
			}
		default:
			for i := range out {
				out[i] = cmpResult(o, strings.Compare(string(x.data[xo[i]:xo[i+1]]), c))
			}
		}
		return
	}
	yo := y.off[:len(out)+1]
	for i := range out {
		a, b := string(x.data[xo[i]:xo[i+1]]), string(y.data[yo[i]:yo[i+1]])
		switch o {
		case opEq:
			out[i] = b2u(a == b)
		case opNe:
			out[i] = b2u(a != b)
		default:
			out[i] = cmpResult(o, strings.Compare(a, b))
		}
	}
}

// cmpResult turns a three-way comparison into the result of o.
func cmpResult(o op, c int) byte {
	switch o {
	case opLt:
		return b2u(c < 0)
	case opLe:
		return b2u(c <= 0)
	case opGt:
		return b2u(c > 0)
	case opGe:
		return b2u(c >= 0)
	case opEq:
		return b2u(c == 0)
	}
	return b2u(c != 0)
}

// minMax computes out = min(x, y) or max(x, y); a NaN in either gives NaN
// (Go's min and max, like torch.minimum).
func minMax[T number](o op, out, x, y []T, xc, yc bool) {
	if xc && !yc {
		x, y, xc, yc = y, x, false, true
	}
	n := len(out)
	if yc {
		c, x := y[0], x[:n]
		if o == opMin {
			for i, v := range x {
				out[i] = min(v, c)
			}
		} else {
			for i, v := range x {
				out[i] = max(v, c)
			}
		}
		return
	}
	x, y = x[:n], y[:n]
	if o == opMin {
		for i := range out {
			out[i] = min(x[i], y[i])
		}
	} else {
		for i := range out {
			out[i] = max(x[i], y[i])
		}
	}
}

func neg[T number](out, x []T) {
	x = x[:len(out)]
	for i, v := range x {
		out[i] = -v
	}
}

func abs[T number](out, x []T) {
	x = x[:len(out)]
	for i, v := range x {
		if v < 0 {
			v = -v
		}
		out[i] = v
	}
}

// mathF64 computes log1p, log, exp or sqrt row by row in float64 (for
// float32 x, then rounded to float32).
func mathF64[T float](o op, out, x []T) {
	x = x[:len(out)]
	if x32, ok := any(x).([]float32); ok {
		mathF32(o, any(out).([]float32), x32)
		return
	}
	for i, v := range x {
		out[i] = T(mathOne(o, float64(v)))
	}
}

// mathF32 is mathF64 for float32. It widens a chunk of x to float64 in
// one loop and calls the function in another: converting in the same
// loop as the call makes the compiler write the conversion into the
// register holding the previous call's result, and CVTSS2SD's false
// dependency on it then serializes the calls (3.5x slower for log).
func mathF32(o op, out, x []float32) {
	var buf [256]float64
	for len(x) > 0 {
		k := min(len(x), len(buf))
		for i, v := range x[:k] {
			buf[i] = float64(v)
		}
		o32 := out[:k]
		for i, f := range buf[:k] {
			if o == opLog1p {
				o32[i] = float32(log1p32(f))
			} else {
				o32[i] = float32(mathOne(o, f))
			}
		}
		x, out = x[k:], out[k:]
	}
}

func mathOne(o op, f float64) float64 {
	switch o {
	case opLog1p:
		return math.Log1p(f)
	case opLog:
		return math.Log(f)
	case opExp:
		return math.Exp(f)
	}
	return math.Sqrt(f)
}

// log1p32 is log1p for a float32 argument f, to be rounded to float32. For
// |f| >= 2^-29, 1 + f is exact in float64 and math.Log (assembly on
// amd64, about 3x faster than math.Log1p) of it rounds to the same
// float32; below, log1p(f) rounds to f itself. Checked against
// math.Log1p on 330M float32s, no difference.
func log1p32(f float64) float64 {
	r := math.Log(1 + f)
	if math.Abs(f) < 0x1p-29 {
		r = f
	}
	return r
}

// convertNum converts numbers with Go's conversion: ints wrap, floats
// round to nearest even. Float to int goes through castFloatInt instead.
func convertNum[D, S number](out []D, x []S) {
	x = x[:len(out)]
	for i, v := range x {
		out[i] = D(v)
	}
}

// castFloatInt truncates floats toward zero; NaN and values outside D's
// range become null (valid[i] = 0).
func castFloatInt[D integer, S float](out []D, x []S, valid []byte, lo, hi float64) {
	x = x[:len(out)]
	for i, v := range x {
		f := float64(v)
		if f > lo && f < hi {
			out[i] = D(f)
		} else {
			out[i], valid[i] = 0, 0
		}
	}
}

func boolToNum[D number](out []D, x []byte) {
	x = x[:len(out)]
	for i, v := range x {
		out[i] = D(v)
	}
}

// toBFloat16 rounds float32 to bfloat16, to nearest with ties to even, as
// torch does; NaN stays a (quiet) NaN.
func toBFloat16(out []uint16, x []float32) {
	x = x[:len(out)]
	for i, v := range x {
		out[i] = bf16(v)
	}
}

func bf16(v float32) uint16 {
	b := math.Float32bits(v)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40 // NaN: keep sign and top payload, make it quiet
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}
