package expr

import (
	"math"
	"slices"
	"sort"
)

// inSet is the constant set of x in (...), in x's kind, sorted and
// without duplicates.
type inSet struct {
	i32  []int32
	i64  []int64
	f32  []float32
	f64  []float64
	strs []string
	smap map[string]struct{} // for large string sets

	// An integer set of more than one value spanning at most bitmapSpan
	// is also a bitmap: value v is in it when bit v-lo is set.
	lo     int64
	bitmap []uint64
}

const bitmapSpan = 1 << 16

// smallSet is the size up to which a linear scan beats a binary search.
const smallSet = 8

func (s *inSet) addInt(k Kind, v int64) {
	switch k {
	case Int32:
		if v == int64(int32(v)) {
			s.i32 = append(s.i32, int32(v))
		}
	case Int64:
		s.i64 = append(s.i64, v)
	case Float32:
		s.f32 = append(s.f32, float32(v))
	case Float64:
		s.f64 = append(s.f64, float64(v))
	}
}

func (s *inSet) addFloat(k Kind, f float64) {
	switch {
	case math.IsNaN(f):
		// equal to nothing
	case k == Float32:
		s.f32 = append(s.f32, float32(f))
	case k == Float64:
		s.f64 = append(s.f64, f)
	case f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63:
		s.addInt(k, int64(f))
	}
}

func (s *inSet) finish(k Kind) {
	s.i32 = slices.Compact(sorted(s.i32))
	s.i64 = slices.Compact(sorted(s.i64))
	s.f32 = slices.Compact(sorted(s.f32))
	s.f64 = slices.Compact(sorted(s.f64))
	sort.Strings(s.strs)
	s.strs = slices.Compact(s.strs)
	ints := s.i64
	if k == Int32 {
		ints = nil
		for _, v := range s.i32 {
			ints = append(ints, int64(v))
		}
	}
	if len(ints) > 1 && uint64(ints[len(ints)-1]-ints[0]) < bitmapSpan {
		s.lo = ints[0]
		s.bitmap = make([]uint64, (ints[len(ints)-1]-ints[0])/64+1)
		for _, v := range ints {
			b := uint64(v - s.lo)
			s.bitmap[b/64] |= 1 << (b % 64)
		}
	}
	if len(s.strs) > smallSet {
		s.smap = make(map[string]struct{}, len(s.strs))
		for _, v := range s.strs {
			s.smap[v] = struct{}{}
		}
	}
}

func sorted[T number](s []T) []T { slices.Sort(s); return s }

// inBitmap is inNums for an integer set with a bitmap.
func inBitmap[T integer](out []byte, x []T, s *inSet, want byte) {
	x = x[:len(out)]
	bm, span, lo := s.bitmap, uint64(len(s.bitmap))*64, s.lo
	for i, v := range x {
		b := uint64(int64(v) - lo)
		in := b2u(b < span)
		c := b & -uint64(in) // 0 outside the span, without a branch
		hit := byte(bm[c/64]>>(c%64)&1) & in
		out[i] = hit ^ 1 ^ want
	}
}

// inNums sets out[i] to whether x[i] is in set (want == 1) or not in it
// (want == 0).
func inNums[T number](out []byte, x, set []T, want byte) {
	x = x[:len(out)]
	switch {
	case len(set) == 0:
		for i := range out {
			out[i] = 1 ^ want
		}
	case len(set) == 1:
		c := set[0]
		for i, v := range x {
			out[i] = b2u(v == c) ^ 1 ^ want
		}
	case len(set) <= smallSet:
		for i, v := range x {
			var hit byte
			for _, c := range set {
				hit |= b2u(v == c)
			}
			out[i] = hit ^ 1 ^ want
		}
	default:
		for i, v := range x {
			_, hit := slices.BinarySearch(set, v)
			out[i] = b2u(hit) ^ 1 ^ want
		}
	}
}

func inStrings(out []byte, x *vec, s *inSet, want byte) {
	off := x.off[:len(out)+1]
	for i := range out {
		v := x.data[off[i]:off[i+1]]
		var hit bool
		if s.smap != nil {
			_, hit = s.smap[string(v)]
		} else {
			for _, c := range s.strs {
				if string(v) == c {
					hit = true
					break
				}
			}
		}
		out[i] = b2u(hit) ^ 1 ^ want
	}
}

// bounds are bucketize's boundaries in the comparison domain of x's kind:
// float32 boundaries rounded to float32 for float32 x (as torch compares
// a float32 tensor with float32 boundaries), float64 for float64 x, and
// for int x the smallest integer >= each boundary, so that an integer x
// is compared exactly.
type bounds struct {
	orig []float64 // as written
	f32  []float32
	f64  []float64
	i64  []int64
}

// makeBounds converts bucketize's boundaries bs for an x of kind k. ints
// holds, where a boundary is an integer constant, its exact value
// (nil entries, or a nil slice, for the others): compared with an int x as
// it is, not as the float64 it may round to beyond 2^53.
func makeBounds(k Kind, bs []float64, ints []*int64) bounds {
	b := bounds{orig: bs}
	for i, f := range bs {
		switch k {
		case Float32:
			b.f32 = append(b.f32, float32(f))
		case Float64:
			b.f64 = append(b.f64, f)
		default:
			if i < len(ints) && ints[i] != nil {
				b.i64 = append(b.i64, *ints[i])
				continue
			}
			c := math.Ceil(f)
			switch {
			case c <= -(1 << 63):
				b.i64 = append(b.i64, math.MinInt64)
			case c >= 1<<63:
				// Above every int64: never <= x. Leaving it out is the
				// same as counting it never.
			default:
				b.i64 = append(b.i64, int64(c))
			}
		}
	}
	return b
}

// bucketize sets out[i] to the number of boundaries <= x[i]; a NaN x is
// above every boundary (numpy.searchsorted(side="right") order).
func bucketize[T number, B number](out []int32, x []T, bs []B) {
	x = x[:len(out)]
	nb := int32(len(bs))
	if len(bs) <= 16 {
		for i, v := range x {
			k := int32(0)
			for _, b := range bs {
				k += int32(b2u(B(v) >= b))
			}
			if v != v {
				k = nb
			}
			out[i] = k
		}
		return
	}
	for i, v := range x {
		if v != v {
			out[i] = nb
			continue
		}
		bv := B(v)
		lo, hi := 0, len(bs)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if bs[m] <= bv {
				lo = m + 1
			} else {
				hi = m
			}
		}
		out[i] = int32(lo)
	}
}

// logicOp computes and/or/not over plain 0/1 vectors (see plainBool).
func logicOp(o op, out, x, y []byte) {
	x = x[:len(out)]
	switch o {
	case opNot:
		for i, v := range x {
			out[i] = 1 ^ v
		}
	case opAnd:
		y = y[:len(out)]
		for i, v := range x {
			out[i] = v & y[i]
		}
	case opOr:
		y = y[:len(out)]
		for i, v := range x {
			out[i] = v | y[i]
		}
	}
}

// plainBool returns n rows of a bool vector as 0/1 bytes with nulls read
// as false: the vector's own bytes when it has no nulls, else a masked
// copy in *scratch.
func plainBool(v *vec, n int, scratch *[]byte) []byte {
	switch {
	case v.cst:
		b := v.b[0]
		if v.valid != nil {
			b &= v.valid[0]
		}
		s := grow(*scratch, n)
		for i := range s {
			s[i] = b
		}
		*scratch = s
		return s
	case v.valid == nil:
		return v.b[:n]
	}
	s := grow(*scratch, n)
	b, valid := v.b[:n], v.valid[:n]
	for i := range s {
		s[i] = b[i] & valid[i]
	}
	*scratch = s
	return s
}

func startsWith(out []byte, x *vec, prefix string) {
	off := x.off[:len(out)+1]
	p := int64(len(prefix))
	for i := range out {
		lo, hi := off[i], off[i+1]
		out[i] = b2u(hi-lo >= p && string(x.data[lo:lo+p]) == prefix)
	}
}

func lengths(out []int32, x *vec) {
	if x.off == nil {
		for i := range out {
			out[i] = int32(x.width)
		}
		return
	}
	off := x.off[:len(out)+1]
	for i := range out {
		out[i] = int32(off[i+1] - off[i])
	}
}

// choose sets out[i] = a[i] where pick[i] is 1, else b[i]; cst inputs
// stand for every row. It selects on the values' bits with a mask, so
// that a random pick costs no mispredicted branches.
func choose[T uint8 | uint32 | uint64](out, a, b []T, ac, bc bool, pick []byte) {
	n := len(out)
	pick = pick[:n]
	switch {
	case ac && bc:
		x, y := a[0], b[0]
		for i, p := range pick {
			m := -T(p)
			out[i] = x&m | y&^m
		}
	case bc:
		a, y := a[:n], b[0]
		for i, p := range pick {
			m := -T(p)
			out[i] = a[i]&m | y&^m
		}
	case ac:
		x, b := a[0], b[:n]
		for i, p := range pick {
			m := -T(p)
			out[i] = x&m | b[i]&^m
		}
	default:
		a, b := a[:n], b[:n]
		for i, p := range pick {
			m := -T(p)
			out[i] = a[i]&m | b[i]&^m
		}
	}
}

// chooseStrings is choose for string vectors; the result's offsets and
// bytes go to off and data, which are returned grown. Null rows are
// empty.
func chooseStrings(off []int64, data []byte, a, b *vec, pick, valid []byte) ([]int64, []byte) {
	n := len(pick)
	off = grow(off, n+1)
	data = data[:0]
	off[0] = 0
	for i, p := range pick {
		v := b
		if p != 0 {
			v = a
		}
		j := i
		if v.cst {
			j = 0
		}
		if valid == nil || valid[i] != 0 {
			data = append(data, v.data[v.off[j]:v.off[j+1]]...)
		}
		off[i+1] = int64(len(data))
	}
	return off, data
}
