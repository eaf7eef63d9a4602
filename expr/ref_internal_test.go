package expr

import (
	"encoding/binary"
	"math"
	"strings"

	"github.com/lastmile/lastmile/column"
)

// rv is one value of the reference evaluator: a row at a time, in the
// plainest Go, written apart from the kernels so that the two check each
// other.
type rv struct {
	null bool
	i    int64   // Bool (0 or 1), Int32, Int64
	f    float64 // Float32 (exactly representable), Float64
	s    string
	u16  uint16 // BFloat16
}

func (v rv) truth() bool { return !v.null && v.i == 1 }

// refEval computes node nd for row r of b.
func refEval(e *Expr, nd *node, b *column.Batch, r int) rv {
	switch nd.op {
	case opConst:
		return constValue(nd)
	case opCol:
		return refColumn(b.Col(e.cols[nd.col].name), r)
	}
	args := make([]rv, len(nd.args))
	for i, a := range nd.args {
		args[i] = refEval(e, a, b, r)
	}
	k := nd.t.Kind
	var ak Kind
	if len(nd.args) > 0 {
		ak = nd.args[0].t.Kind
	}
	x := args[0]
	switch nd.op {
	case opAnd:
		return boolRV(x.truth() && args[1].truth())
	case opOr:
		return boolRV(x.truth() || args[1].truth())
	case opNot:
		return boolRV(!x.truth())
	case opIsNull:
		return boolRV(x.null)
	case opFillNull:
		if x.null {
			return args[1]
		}
		return x
	case opIf:
		if x.truth() {
			return args[1]
		}
		return args[2]
	}
	// Everything else: null in, null out (comparisons: false).
	for _, a := range args {
		if a.null {
			if nd.t.Kind == Bool {
				return boolRV(false)
			}
			return rv{null: true}
		}
	}
	switch nd.op {
	case opCast:
		return refCast(x, ak, k)
	case opNeg:
		if ak.IsInt() {
			return intRV(k, -x.i)
		}
		return floatRV(k, -x.f)
	case opAdd, opSub, opMul:
		y := args[1]
		if ak.IsInt() {
			switch nd.op {
			case opAdd:
				return intRV(k, x.i+y.i)
			case opSub:
				return intRV(k, x.i-y.i)
			}
			return intRV(k, x.i*y.i)
		}
		switch nd.op {
		case opAdd:
			return floatRV(k, x.f+y.f)
		case opSub:
			return floatRV(k, x.f-y.f)
		}
		return floatRV(k, x.f*y.f)
	case opDiv, opMod:
		y := args[1]
		if ak.IsFloat() {
			if nd.op == opDiv {
				return floatRV(k, x.f/y.f)
			}
			m := math.Mod(x.f, y.f)
			if m != 0 && (m < 0) != (y.f < 0) {
				m += y.f
			}
			return floatRV(k, m)
		}
		if y.i == 0 {
			return rv{null: true}
		}
		if x.i == math.MinInt64 && y.i == -1 {
			if nd.op == opDiv {
				return intRV(k, math.MinInt64)
			}
			return intRV(k, 0)
		}
		q, m := x.i/y.i, x.i%y.i
		if m != 0 && (m < 0) != (y.i < 0) {
			q, m = q-1, m+y.i
		}
		if nd.op == opDiv {
			return intRV(k, q)
		}
		return intRV(k, m)
	case opEq, opNe, opLt, opLe, opGt, opGe:
		y := args[1]
		var c int
		nan := false
		switch {
		case ak == String:
			c = strings.Compare(x.s, y.s)
		case ak.IsFloat():
			nan = math.IsNaN(x.f) || math.IsNaN(y.f)
			c = cmpFloat(x.f, y.f)
		default:
			c = int(sign(x.i - y.i))
			if (x.i < y.i) != (c < 0) { // overflow of x - y
				c = -c
			}
		}
		if nan {
			return boolRV(nd.op == opNe)
		}
		switch nd.op {
		case opEq:
			return boolRV(c == 0)
		case opNe:
			return boolRV(c != 0)
		case opLt:
			return boolRV(c < 0)
		case opLe:
			return boolRV(c <= 0)
		case opGt:
			return boolRV(c > 0)
		}
		return boolRV(c >= 0)
	case opIn, opNotIn:
		hit := false
		s := &nd.set
		switch ak {
		case String:
			for _, v := range s.strs {
				hit = hit || v == x.s
			}
		case Int32, Int64:
			for _, v := range s.floats() {
				hit = hit || float64(x.i) == v
			}
		default:
			for _, v := range s.floats() {
				hit = hit || x.f == v
			}
		}
		return boolRV(hit == (nd.op == opIn))
	case opStartsWith:
		return boolRV(strings.HasPrefix(x.s, nd.prefix))
	case opLog1p:
		return floatRV(k, math.Log1p(x.f))
	case opLog:
		return floatRV(k, math.Log(x.f))
	case opExp:
		return floatRV(k, math.Exp(x.f))
	case opSqrt:
		return floatRV(k, math.Sqrt(x.f))
	case opAbs:
		if ak.IsInt() {
			if x.i < 0 {
				return intRV(k, -x.i)
			}
			return x
		}
		return floatRV(k, math.Abs(x.f))
	case opMin, opMax:
		y := args[1]
		if ak.IsInt() {
			if (x.i < y.i) == (nd.op == opMin) {
				return x
			}
			return y
		}
		if math.IsNaN(x.f) || math.IsNaN(y.f) {
			return rv{f: math.NaN()}
		}
		if (x.f < y.f) == (nd.op == opMin) {
			return x
		}
		return y
	case opBucketize:
		n := int64(0)
		for _, bd := range nd.bounds.orig {
			switch {
			case math.IsNaN(x.f):
				n++
			case ak == Float32:
				if float32(x.f) >= float32(bd) {
					n++
				}
			case ak.IsInt():
				if float64(x.i) >= bd {
					n++
				}
			default:
				if x.f >= bd {
					n++
				}
			}
		}
		return rv{i: n}
	case opHashMod:
		var h uint64
		switch ak {
		case String:
			h = HashBytes([]byte(x.s)) // checked against xxHash in hash_test.go
		case Float32, Float64:
			f := x.f
			bits := math.Float64bits(f)
			if f == 0 {
				bits = 0
			} else if math.IsNaN(f) {
				bits = 0x7ff8000000000000
			}
			h = HashBytes(binary.LittleEndian.AppendUint64(nil, bits))
		default:
			h = HashBytes(binary.LittleEndian.AppendUint64(nil, uint64(x.i)))
		}
		return rv{i: int64(h % nd.mod.d)}
	case opLen:
		if ak == String {
			return rv{i: int64(len(x.s))}
		}
		return x
	}
	panic("reference: no " + nd.op.String())
}

func sign(v int64) int64 {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

func boolRV(b bool) rv {
	if b {
		return rv{i: 1}
	}
	return rv{}
}

func intRV(k Kind, v int64) rv {
	if k == Int32 {
		v = int64(int32(v))
	}
	return rv{i: v}
}

func floatRV(k Kind, f float64) rv {
	if k == Float32 {
		f = float64(float32(f))
	}
	return rv{f: f}
}

func refCast(x rv, from, to Kind) rv {
	switch {
	case to == BFloat16:
		return rv{u16: refBFloat16(float32(x.f))}
	case (from.IsInt() || from == Bool) && to.IsInt():
		return intRV(to, x.i)
	case from.IsInt() || from == Bool:
		if to == Float32 {
			return rv{f: float64(float32(x.i))}
		}
		return rv{f: float64(x.i)}
	case to.IsFloat():
		return floatRV(to, x.f)
	}
	t := math.Trunc(x.f)
	lo, hi := -math.Pow(2, 63), math.Pow(2, 63)
	if to == Int32 {
		lo, hi = -math.Pow(2, 31), math.Pow(2, 31)
	}
	if math.IsNaN(t) || t < lo || t >= hi {
		return rv{null: true}
	}
	return rv{i: int64(t)}
}

// refBFloat16 rounds to the nearer of the two bfloat16 values around f,
// the one with an even last bit on a tie.
func refBFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	switch {
	case f != f:
		return 0x7fc0 | uint16(b>>16)&0x8000
	case math.IsInf(float64(f), 0):
		return uint16(b >> 16)
	}
	down := b &^ 0xffff // toward zero
	up := down + 0x10000
	upF := float64(math.Float32frombits(up))
	if math.IsInf(upF, 0) {
		upF = math.Copysign(math.Ldexp(1, 128), upF) // where the next value would be
	}
	dd := math.Abs(float64(f) - float64(math.Float32frombits(down)))
	du := math.Abs(upF - float64(f))
	if dd < du || dd == du && down&0x10000 == 0 {
		return uint16(down >> 16)
	}
	return uint16(up >> 16)
}

func constValue(nd *node) rv {
	v := &nd.out
	if v.valid != nil && v.valid[0] == 0 {
		return rv{null: true}
	}
	switch v.kind {
	case Bool:
		return rv{i: int64(v.b[0])}
	case Int32:
		return rv{i: int64(v.i32[0])}
	case Int64:
		return rv{i: v.i64[0]}
	case Float32:
		return rv{f: float64(v.f32[0])}
	case Float64:
		return rv{f: v.f64[0]}
	case String:
		return rv{s: nd.constString()}
	}
	return rv{u16: v.u16[0]}
}

func refColumn(c *column.Column, r int) rv {
	if c.Valid != nil && c.Valid[r] == 0 {
		return rv{null: true}
	}
	switch c.Kind {
	case column.Bytes:
		return rv{s: string(c.Row(r))}
	case column.List:
		return rv{i: c.Offsets[r+1] - c.Offsets[r]}
	}
	if c.Width > 1 {
		return rv{i: int64(c.Width)}
	}
	d := c.Data
	switch c.DType {
	case column.Bool, column.Uint8:
		return rv{i: int64(d[r])}
	case column.Int8:
		return rv{i: int64(int8(d[r]))}
	case column.Int16:
		return rv{i: int64(int16(binary.LittleEndian.Uint16(d[2*r:])))}
	case column.Int32:
		return rv{i: int64(int32(binary.LittleEndian.Uint32(d[4*r:])))}
	case column.Int64:
		return rv{i: int64(binary.LittleEndian.Uint64(d[8*r:]))}
	case column.Float32:
		return rv{f: float64(math.Float32frombits(binary.LittleEndian.Uint32(d[4*r:])))}
	case column.Float64:
		return rv{f: math.Float64frombits(binary.LittleEndian.Uint64(d[8*r:]))}
	case column.BFloat16:
		return rv{f: float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(d[2*r:])) << 16))}
	case column.Float16:
		h := binary.LittleEndian.Uint16(d[2*r:])
		s, ex, fr := h>>15, int(h>>10&0x1f), float64(h&0x3ff)
		var f float64
		switch ex {
		case 0:
			f = math.Ldexp(fr/1024, -14)
		case 31:
			f = math.Inf(1)
			if fr != 0 {
				f = math.NaN()
			}
		default:
			f = math.Ldexp(1+fr/1024, ex-15)
		}
		if s == 1 {
			f = -f
		}
		return rv{f: f}
	}
	panic("reference: column dtype " + c.DType.String())
}
