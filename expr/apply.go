package expr

// apply computes node nd over n rows from its evaluated arguments a into
// nd.out. Arguments may be cst (one value for every row); when they all
// are, n is 1 (constant folding).
func apply(nd *node, a []*vec, n int) {
	switch o := nd.op; o {
	case opCast:
		applyCast(nd, a[0], n)
	case opNeg, opAbs:
		applyUnary(nd, a[0], n)
	case opAdd, opSub, opMul, opDiv, opMod, opMin, opMax:
		applyArith(nd, a[0], a[1], n)
	case opEq, opNe, opLt, opLe, opGt, opGe:
		applyCompare(nd, a[0], a[1], n)
	case opIn, opNotIn:
		applyIn(nd, a[0], n)
	case opAnd, opOr, opNot:
		applyLogic(nd, a, n)
	case opIsNull:
		applyIsNull(nd, a[0], n)
	case opFillNull:
		x, v := a[0], a[1]
		if x.valid == nil {
			nd.out = *x
			return
		}
		keep := validOf(x, n, &nd.tmp[0])
		nd.choose(n, keep, x, v)
	case opIf:
		nd.choose(n, plainBool(a[0], n, &nd.tmp[0]), a[1], a[2])
	case opStartsWith:
		out := nd.outBool(n)
		startsWith(out, a[0], nd.prefix)
		nd.falseWhereNull(out, a[0], 0)
	case opLog1p, opLog, opExp, opSqrt:
		applyMath(nd, a[0], n)
	case opBucketize:
		applyBucketize(nd, a[0], n)
	case opHashMod:
		applyHashMod(nd, a[0], n)
	case opLen:
		lengths(nd.outI32(n), a[0])
		nd.out.valid = a[0].valid
	default:
		panic("BUG: apply " + o.String())
	}
}

// applyUnary computes neg or abs of x; the result is null where x is.
func applyUnary(nd *node, x *vec, n int) {
	o := nd.op
	switch x.kind {
	case Int32:
		unary(o, nd.outI32(n), x.i32)
	case Int64:
		unary(o, nd.outI64(n), x.i64)
	case Float32:
		unary(o, nd.outF32(n), x.f32)
	case Float64:
		unary(o, nd.outF64(n), x.f64)
	}
	nd.out.valid = x.valid
}

// applyCompare computes a comparison of x and y (of the same kind). The
// result is false, not null, where either side is null.
func applyCompare(nd *node, x, y *vec, n int) {
	o := nd.op
	out := nd.outBool(n)
	switch x.kind {
	case Int32:
		compare(o, out, x.i32, y.i32, x.cst, y.cst)
	case Int64:
		compare(o, out, x.i64, y.i64, x.cst, y.cst)
	case Float32:
		compare(o, out, x.f32, y.f32, x.cst, y.cst)
	case Float64:
		compare(o, out, x.f64, y.f64, x.cst, y.cst)
	case String:
		compareStrings(o, out, x, y)
	case Bool:
		compareBools(o, out, x, y)
	}
	nd.falseWhereNull(out, x, 0)
	nd.falseWhereNull(out, y, 1)
}

// applyIn computes in / not in of x against the node's constant set,
// through its bitmap when it has one. The result is false where x is null.
func applyIn(nd *node, x *vec, n int) {
	o, s := nd.op, &nd.set
	out := nd.outBool(n)
	want := b2u(o == opIn)
	switch {
	case x.kind == Int32 && s.bitmap != nil:
		inBitmap(out, x.i32, s, want)
	case x.kind == Int64 && s.bitmap != nil:
		inBitmap(out, x.i64, s, want)
	case x.kind == Int32:
		inNums(out, x.i32, s.i32, want)
	case x.kind == Int64:
		inNums(out, x.i64, s.i64, want)
	case x.kind == Float32:
		inNums(out, x.f32, s.f32, want)
	case x.kind == Float64:
		inNums(out, x.f64, s.f64, want)
	case x.kind == String:
		inStrings(out, x, s, want)
	}
	nd.falseWhereNull(out, x, 0)
}

// applyLogic computes and, or (of a[0] and a[1]) or not (of a[0]) over
// their plain bool values.
func applyLogic(nd *node, a []*vec, n int) {
	o := nd.op
	out := nd.outBool(n)
	x := plainBool(a[0], n, &nd.tmp[0])
	var y []byte
	if o != opNot {
		y = plainBool(a[1], n, &nd.tmp[1])
	}
	logicOp(o, out, x, y)
}

// applyIsNull computes is null of x: 1 where x is not valid.
func applyIsNull(nd *node, x *vec, n int) {
	out := nd.outBool(n)
	v := validOf(x, n, &nd.tmp[0])
	if v == nil {
		clear(out)
	} else {
		for i, b := range v[:n] {
			out[i] = 1 ^ b
		}
	}
}

// applyMath computes a float function of x in x's precision; the result
// is null where x is.
func applyMath(nd *node, x *vec, n int) {
	if x.kind == Float32 {
		mathF64(nd.op, nd.outF32(n), x.f32)
	} else {
		mathF64(nd.op, nd.outF64(n), x.f64)
	}
	nd.out.valid = x.valid
}

// applyBucketize computes the bucket of x among the node's bounds; the
// result is null where x is.
func applyBucketize(nd *node, x *vec, n int) {
	b := &nd.bounds
	out := nd.outI32(n)
	switch x.kind {
	case Int32:
		bucketize(out, x.i32, b.i64)
	case Int64:
		bucketize(out, x.i64, b.i64)
	case Float32:
		bucketize(out, x.f32, b.f32)
	case Float64:
		bucketize(out, x.f64, b.f64)
	}
	nd.out.valid = x.valid
}

// applyHashMod computes the hash of x modulo the node's modulus; the
// result is null where x is.
func applyHashMod(nd *node, x *vec, n int) {
	out := nd.outI64(n)
	switch x.kind {
	case Int32:
		hashModInts(out, x.i32, &nd.mod)
	case Int64:
		hashModInts(out, x.i64, &nd.mod)
	case Float32:
		hashModFloats(out, x.f32, &nd.mod)
	case Float64:
		hashModFloats(out, x.f64, &nd.mod)
	case Bool:
		hashModBools(out, x.b, &nd.mod)
	case String:
		hashModStrings(out, x, &nd.mod)
	}
	nd.out.valid = x.valid
}

func unary[T number](o op, out, x []T) {
	if o == opNeg {
		neg(out, x)
	} else {
		abs(out, x)
	}
}

// falseWhereNull clears out where x is null: comparisons with a null are
// false.
func (nd *node) falseWhereNull(out []byte, x *vec, scratch int) {
	v := validOf(x, len(out), &nd.tmp[scratch])
	if v == nil {
		return
	}
	v = v[:len(out)]
	for i := range out {
		out[i] &= v[i]
	}
}

func compareBools(o op, out []byte, x, y *vec) {
	if x.cst && !y.cst {
		x, y = y, x
	}
	flip := b2u(o == opNe)
	for i := range out {
		j := i
		if y.cst {
			j = 0
		}
		out[i] = b2u(x.b[i] == y.b[j]) ^ flip
	}
}

func applyArith(nd *node, x, y *vec, n int) {
	o := nd.op
	xc, yc := x.cst, y.cst
	if o == opMin || o == opMax {
		switch x.kind {
		case Int32:
			minMax(o, nd.outI32(n), x.i32, y.i32, xc, yc)
		case Int64:
			minMax(o, nd.outI64(n), x.i64, y.i64, xc, yc)
		case Float32:
			minMax(o, nd.outF32(n), x.f32, y.f32, xc, yc)
		case Float64:
			minMax(o, nd.outF64(n), x.f64, y.f64, xc, yc)
		}
		nd.andValid(n, validOf(x, n, &nd.tmp[0]), validOf(y, n, &nd.tmp[1]))
		return
	}
	if x.kind.IsInt() && (o == opDiv || o == opMod) {
		var valid []byte
		switch x.kind {
		case Int32:
			out := nd.outI32(n)
			valid = nd.fillValid(n, x, y)
			idiv(o, out, x.i32, y.i32, xc, yc, valid)
		case Int64:
			out := nd.outI64(n)
			valid = nd.fillValid(n, x, y)
			idiv(o, out, x.i64, y.i64, xc, yc, valid)
		}
		return
	}
	switch x.kind {
	case Int32:
		arith(o, nd.outI32(n), x.i32, y.i32, xc, yc)
	case Int64:
		arith(o, nd.outI64(n), x.i64, y.i64, xc, yc)
	case Float32:
		if o == opMod {
			fmod(nd.outF32(n), x.f32, y.f32, xc, yc)
		} else {
			arith(o, nd.outF32(n), x.f32, y.f32, xc, yc)
		}
	case Float64:
		if o == opMod {
			fmod(nd.outF64(n), x.f64, y.f64, xc, yc)
		} else {
			arith(o, nd.outF64(n), x.f64, y.f64, xc, yc)
		}
	}
	nd.andValid(n, validOf(x, n, &nd.tmp[0]), validOf(y, n, &nd.tmp[1]))
}

// fillValid makes out.valid an owned mask of the rows valid in both x and
// y, for kernels that add nulls of their own.
func (nd *node) fillValid(n int, x, y *vec) []byte {
	vx, vy := validOf(x, n, &nd.tmp[0]), validOf(y, n, &nd.tmp[1])
	v := nd.ownValid(n)
	switch {
	case vx == nil && vy == nil:
		for i := range v {
			v[i] = 1
		}
	case vx == nil:
		copy(v, vy[:n])
	case vy == nil:
		copy(v, vx[:n])
	default:
		for i := range v {
			v[i] = vx[i] & vy[i]
		}
	}
	return v
}

// float → int casts: values strictly between lo and hi fit after
// truncation toward zero.
const (
	lo32, hi32 = -2147483649.0, 2147483648.0
	lo64, hi64 = -9223372036854777856.0, 9223372036854775808.0 // -2^63 - 2048 is the float64 below -2^63
)

func applyCast(nd *node, x *vec, n int) {
	nd.out.valid = x.valid
	switch nd.t.Kind {
	case BFloat16:
		toBFloat16(nd.outU16(n), x.f32)
		nd.out.valid = x.valid
		return
	case Int32:
		out := nd.outI32(n)
		switch x.kind {
		case Bool:
			boolToNum(out, x.b)
		case Int64:
			convertNum(out, x.i64)
		case Float32:
			castFloatInt(out, x.f32, nd.castValid(n, x), lo32, hi32)
			return
		case Float64:
			castFloatInt(out, x.f64, nd.castValid(n, x), lo32, hi32)
			return
		}
	case Int64:
		out := nd.outI64(n)
		switch x.kind {
		case Bool:
			boolToNum(out, x.b)
		case Int32:
			convertNum(out, x.i32)
		case Float32:
			castFloatInt(out, x.f32, nd.castValid(n, x), lo64, hi64)
			return
		case Float64:
			castFloatInt(out, x.f64, nd.castValid(n, x), lo64, hi64)
			return
		}
	case Float32:
		out := nd.outF32(n)
		switch x.kind {
		case Bool:
			boolToNum(out, x.b)
		case Int32:
			convertNum(out, x.i32)
		case Int64:
			convertNum(out, x.i64)
		case Float64:
			convertNum(out, x.f64)
		}
	case Float64:
		out := nd.outF64(n)
		switch x.kind {
		case Bool:
			boolToNum(out, x.b)
		case Int32:
			convertNum(out, x.i32)
		case Int64:
			convertNum(out, x.i64)
		case Float32:
			convertNum(out, x.f32)
		}
	}
	nd.out.valid = x.valid
}

func (nd *node) castValid(n int, x *vec) []byte {
	v := nd.ownValid(n)
	if x.valid == nil {
		for i := range v {
			v[i] = 1
		}
	} else {
		copy(v, x.valid[:n])
	}
	return v
}

// choose builds out[i] = a[i] where pick[i] is 1, else b[i], with the
// chosen side's validity.
func (nd *node) choose(n int, pick []byte, a, b *vec) {
	switch nd.t.Kind {
	case Bool:
		choose(nd.outBool(n), a.b, b.b, a.cst, b.cst, pick)
	case Int32:
		choose(viewAs[uint32](asBytes(nd.outI32(n))), bitsOf[uint32](a.i32), bitsOf[uint32](b.i32), a.cst, b.cst, pick)
	case Int64:
		choose(viewAs[uint64](asBytes(nd.outI64(n))), bitsOf[uint64](a.i64), bitsOf[uint64](b.i64), a.cst, b.cst, pick)
	case Float32:
		choose(viewAs[uint32](asBytes(nd.outF32(n))), bitsOf[uint32](a.f32), bitsOf[uint32](b.f32), a.cst, b.cst, pick)
	case Float64:
		choose(viewAs[uint64](asBytes(nd.outF64(n))), bitsOf[uint64](a.f64), bitsOf[uint64](b.f64), a.cst, b.cst, pick)
	}
	va, vb := validOf(a, n, &nd.tmp[1]), validOf(b, n, &nd.tmp[2])
	var valid []byte
	if va != nil || vb != nil {
		valid = nd.ownValid(n)
		ones := nd.ones(n)
		if va == nil {
			va = ones
		}
		if vb == nil {
			vb = ones
		}
		choose(valid, va, vb, false, false, pick)
	}
	if nd.t.Kind == String {
		nd.own.off, nd.own.data = chooseStrings(nd.own.off, nd.own.data, a, b, pick[:n], valid)
		nd.out = vec{kind: String, off: nd.own.off, data: nd.own.data}
	}
	nd.out.valid = valid
}

// ones returns n bytes of 1 from the node's scratch.
func (nd *node) ones(n int) []byte {
	o := nd.tmp[3]
	if len(o) < n {
		o = grow(o, n)
		for i := range o {
			o[i] = 1
		}
		nd.tmp[3] = o
	}
	return o[:n]
}

// bitsOf reinterprets a slice of 4- or 8-byte numbers as their bits.
func bitsOf[B uint32 | uint64, T any](s []T) []B { return viewAs[B](asBytes(s)) }
