package ops

import (
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/spec"
)

// cast: convert columns to int32, int64, float32, float64 or bfloat16.
//
// A scalar column is cast exactly as the expression cast(x, T) does (it
// compiles to that expression): ints wrap, floats to ints truncate toward
// zero and a NaN or a value out of range becomes null, bfloat16 rounds
// from float32 to nearest, ties to even. List and [B, L] columns are cast
// element by element the same way, except that an element that does not
// fit is an error (elements cannot be null).

type castStep struct {
	stepBase
	src int
	to  column.DType
	f32 []float32
}

func (c *compiler) cast(op *spec.Op) error {
	var results []castResult
	ee := entryErrs{c: c}
	for _, a := range op.Cast {
		r, err := c.castEntry(op, a)
		if err != nil {
			ee.add(err)
			continue
		}
		if r.vid >= 0 {
			results = append(results, r)
		}
	}
	if err := ee.err(); err != nil {
		return err
	}
	for _, r := range results {
		c.setColumn(r.name, r.vid, r.nullable)
	}
	return nil
}

// castResult is the column one entry of a cast makes: vid -1 when the
// column has the dtype already.
type castResult struct {
	name     string
	vid      int
	nullable bool
}

// castEntry compiles one entry of a cast op.
func (c *compiler) castEntry(op *spec.Op, a spec.Assign) (castResult, error) {
	none := castResult{vid: -1}
	e, why := c.groupLookup(a.Name)
	if e == nil {
		return none, c.errAt(op, a, "%s", why)
	}
	v := c.vals[e.vid]
	to, err := column.ParseDType(a.Value)
	if err != nil {
		return none, c.errAt(op, a, "%v", err)
	}
	if v.kind == column.Bytes || !isNumDType(v.dtype) && v.dtype != column.Bool {
		return none, c.errAt(op, a, "column %q is %s; cast converts numbers (for strings use hash_mod in a map)", a.Name, v.describe())
	}
	if v.dtype == to {
		return none, nil
	}
	if v.kind == column.Fixed && v.width == 1 {
		if strings.Contains(a.Name, "`") {
			return none, c.errAt(op, a, "column %q has a backquote in its name, which cast cannot quote; rename it first", a.Name)
		}
		r, err := c.compileExpr(fmt.Sprintf("cast(`%s`, %s)", a.Name, a.Value))
		if err != nil {
			return none, c.errAt(op, a, "%v", err)
		}
		t := r.e.Type()
		vid := c.addValue(value{kind: column.Fixed, dtype: t.Kind.DType(), width: 1, nullable: t.Nullable, producer: -1, unit: r.e.Unit()}) // a DATE cast to int64 still counts days
		c.addStep(&mapStep{stepBase: stepBase{op: op, what: a.Name, reads: r.vids, writes: []int{vid}}, x: r})
		return castResult{a.Name, vid, t.Nullable}, nil
	}
	vid := c.addValue(value{kind: v.kind, dtype: to, width: v.width, nullable: v.nullable, producer: -1})
	c.addStep(&castStep{stepBase: stepBase{op: op, what: a.Name, reads: []int{e.vid}, writes: []int{vid}}, src: e.vid, to: to})
	return castResult{a.Name, vid, e.nullable}, nil
}

func (s *castStep) clone() step {
	return &castStep{stepBase: s.stepBase, src: s.src, to: s.to}
}

func (s *castStep) compute(f *frame) error {
	src := f.vals[s.src]
	dst := f.dst(s.writes[0])
	dst.Kind, dst.DType, dst.Width, dst.Len = src.Kind, s.to, src.Width, src.Len
	if src.Offsets == nil {
		dst.Offsets = nil
	} else {
		dst.Offsets = append(dst.Offsets[:0], src.Offsets...)
	}
	if src.Valid == nil {
		dst.Valid = nil
	} else {
		dst.Valid = append(dst.Valid[:0], src.Valid...)
	}
	n := len(src.Data) / src.DType.Size()
	dst.Data = column.Grow(dst.Data, n*s.to.Size())
	var bad int
	switch src.DType {
	case column.Int8:
		bad = convert(dst.Data, s.to, view[int8](src.Data), false)
	case column.Uint8, column.Bool:
		bad = convert(dst.Data, s.to, src.Data, false)
	case column.Int16:
		bad = convert(dst.Data, s.to, view[int16](src.Data), false)
	case column.Int32:
		bad = convert(dst.Data, s.to, view[int32](src.Data), false)
	case column.Int64:
		bad = convert(dst.Data, s.to, view[int64](src.Data), false)
	case column.Float32:
		bad = convert(dst.Data, s.to, view[float32](src.Data), true)
	case column.Float64:
		bad = convert(dst.Data, s.to, view[float64](src.Data), true)
	case column.Float16, column.BFloat16:
		s.f32 = halfToF32(s.f32, src)
		bad = convert(dst.Data, s.to, s.f32, true)
	}
	if bad >= 0 {
		return dataErr(s.op, s.what, "element %v does not fit %v; clip it first (clip is an expression function) or cast to a float",
			elemString(src, bad), s.to)
	}
	return nil
}

type number interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~float32 | ~float64
}

// float → int bounds: values strictly between lo and hi fit after
// truncation toward zero (the expression package's).
const (
	lo32, hi32 = -2147483649.0, 2147483648.0
	lo64, hi64 = -9223372036854777856.0, 9223372036854775808.0
)

// convert converts src into dst (to's elements) and returns the index of
// the first float that does not fit an int target, or -1.
func convert[S number](dst []byte, to column.DType, src []S, isFloat bool) int {
	switch to {
	case column.Int32:
		return toInt(view[int32](dst), src, isFloat, lo32, hi32)
	case column.Int64:
		return toInt(view[int64](dst), src, isFloat, lo64, hi64)
	case column.Float32:
		d := view[float32](dst)
		for i, v := range src {
			d[i] = float32(v)
		}
	case column.Float64:
		d := view[float64](dst)
		for i, v := range src {
			d[i] = float64(v)
		}
	case column.BFloat16:
		d := view[uint16](dst)
		for i, v := range src {
			d[i] = bf16(float32(v))
		}
	}
	return -1
}

func toInt[D int32 | int64, S number](dst []D, src []S, isFloat bool, lo, hi float64) int {
	if !isFloat {
		for i, v := range src {
			dst[i] = D(v)
		}
		return -1
	}
	for i, v := range src {
		f := float64(v)
		if !(f > lo && f < hi) {
			return i
		}
		dst[i] = D(v)
	}
	return -1
}

func view[T any](b []byte) []T {
	var zero T
	n := len(b) / int(unsafe.Sizeof(zero))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

func halfToF32(buf []float32, c *column.Column) []float32 {
	h := view[uint16](c.Data)
	if cap(buf) < len(h) {
		buf = make([]float32, len(h))
	}
	buf = buf[:len(h)]
	for i, v := range h {
		if c.DType == column.BFloat16 {
			buf[i] = math.Float32frombits(uint32(v) << 16)
		} else {
			buf[i] = f16to32(v)
		}
	}
	return buf
}

func elemString(c *column.Column, i int) string {
	switch c.DType {
	case column.Float32:
		return fmt.Sprint(view[float32](c.Data)[i])
	case column.Float64:
		return fmt.Sprint(view[float64](c.Data)[i])
	}
	return fmt.Sprintf("#%d", i)
}

// bf16 rounds a float32 to bfloat16, to nearest with ties to even; a NaN
// stays a quiet NaN. Bit for bit the expression package's (and torch's).
func bf16(v float32) uint16 {
	b := math.Float32bits(v)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// f16 rounds a float32 to an IEEE-754 half, to nearest with ties to even.
func f16(v float32) uint16 {
	b := math.Float32bits(v)
	sign := uint16(b>>16) & 0x8000
	e := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if e == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	exp := e - 127 + 15
	if exp >= 0x1f {
		return sign | 0x7c00
	}
	round := func(r, rem, half uint32) uint16 {
		if rem > half || rem == half && r&1 == 1 {
			r++
		}
		return sign | uint16(r)
	}
	if exp <= 0 {
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint(14 - exp)
		return round(mant>>shift, mant&(1<<shift-1), 1<<(shift-1))
	}
	return round(uint32(exp)<<10|mant>>13, mant&0x1fff, 0x1000)
}

// f16to32 converts an IEEE-754 half to float32 exactly.
func f16to32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
	}
	f := float32(frac) / (1 << 24)
	if sign != 0 {
		f = -f
	}
	return f
}
