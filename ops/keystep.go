package ops

import (
	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/expr"
)

// keyStep prepares one key of a jagged group whose values change: a list
// cut to limit elements (keeping the last ones when keepLast) and, with
// mod, every id replaced by hash_mod(id, mod) as the expression function
// computes it. The result is int64: a List for a list column, a scalar
// Fixed column (validity kept) for a scalar or string one.
type keyStep struct {
	stepBase
	mod      uint64 // 0: no hashing
	limit    int    // 0: no bound
	keepLast bool
}

func (s *keyStep) clone() step { c := *s; return &c }

func (s *keyStep) compute(f *frame) error {
	src := f.vals[s.reads[0]]
	dst := f.dst(s.writes[0])
	dst.Kind, dst.DType, dst.Width, dst.Len = src.Kind, column.Int64, 1, src.Len
	if src.Kind == column.Bytes {
		dst.Kind = column.Fixed
	}
	if src.Valid == nil || dst.Kind == column.List {
		dst.Valid = nil // a null list is empty already
	} else {
		dst.Valid = append(dst.Valid[:0], src.Valid[:src.Len]...)
	}
	switch src.Kind {
	case column.Bytes:
		dst.Offsets = nil
		dst.Data = column.Grow(dst.Data, 8*src.Len)
		out := view[int64](dst.Data)
		for i := range src.Len {
			out[i] = int64(expr.HashBytes(src.Row(i)) % s.mod)
		}
		return nil
	case column.Fixed:
		dst.Offsets = nil
		dst.Data = column.Grow(dst.Data, 8*src.Len)
		s.ids(view[int64](dst.Data), src, 0, src.Len)
		return nil
	}
	dst.Offsets = growI64(dst.Offsets, src.Len+1)
	dst.Offsets[0] = 0
	var n int64
	for i := range src.Len {
		lo, hi := src.Offsets[i], src.Offsets[i+1]
		if s.limit > 0 && hi-lo > int64(s.limit) {
			if s.keepLast {
				lo = hi - int64(s.limit)
			} else {
				hi = lo + int64(s.limit)
			}
		}
		n += hi - lo
		dst.Offsets[i+1] = n
	}
	dst.Data = column.Grow(dst.Data, 8*int(n))
	out := view[int64](dst.Data)
	for i := range src.Len {
		lo, hi := src.Offsets[i], src.Offsets[i+1]
		m := dst.Offsets[i+1] - dst.Offsets[i]
		if s.keepLast {
			lo = hi - m
		}
		s.ids(out[dst.Offsets[i]:dst.Offsets[i+1]], src, int(lo), int(lo+m))
	}
	return nil
}

// ids writes elements [lo, hi) of src's values to out as int64, hashed
// when the key hashes.
func (s *keyStep) ids(out []int64, src *column.Column, lo, hi int) {
	switch src.DType {
	case column.Int64:
		ids(out, view[int64](src.Data)[lo:hi], s.mod)
	case column.Int32:
		ids(out, view[int32](src.Data)[lo:hi], s.mod)
	case column.Int16:
		ids(out, view[int16](src.Data)[lo:hi], s.mod)
	case column.Int8:
		ids(out, view[int8](src.Data)[lo:hi], s.mod)
	default: // uint8, bool
		ids(out, src.Data[lo:hi], s.mod)
	}
}

func ids[T int8 | int16 | int32 | int64 | uint8](out []int64, in []T, mod uint64) {
	if mod == 0 {
		for i, v := range in {
			out[i] = int64(v)
		}
		return
	}
	for i, v := range in {
		out[i] = int64(expr.HashInt(int64(v)) % mod)
	}
}

// weightsStep prepares the weights of a jagged key: the weights list cut
// as keyStep cuts the key's (limit, keepLast), after checking that every
// row has as many weights as the key has ids. Its values keep their
// dtype; the trainer's kjt(weights=) makes them float32.
type weightsStep struct {
	stepBase
	key      string // the key's column, for errors
	limit    int    // 0: no bound
	keepLast bool
}

func (s *weightsStep) clone() step { c := *s; return &c }

func (s *weightsStep) compute(f *frame) error {
	key, src := f.vals[s.reads[0]], f.vals[s.reads[1]]
	for i := range src.Len {
		if n, m := src.Offsets[i+1]-src.Offsets[i], key.Offsets[i+1]-key.Offsets[i]; n != m {
			return dataErr(s.op, s.what, "a row has %d weights where its key %q has %d ids; weights must line up with the ids element by element", n, s.key, m)
		}
	}
	dst := f.dst(s.writes[0])
	dst.Kind, dst.DType, dst.Width, dst.Len = column.List, src.DType, 1, src.Len
	if src.Valid == nil {
		dst.Valid = nil
	} else {
		dst.Valid = append(dst.Valid[:0], src.Valid[:src.Len]...)
	}
	size := src.DType.Size()
	dst.Offsets = growI64(dst.Offsets, src.Len+1)
	dst.Offsets[0] = 0
	var n int64
	for i := range src.Len {
		n += min(src.Offsets[i+1]-src.Offsets[i], int64(s.limitOr(src)))
		dst.Offsets[i+1] = n
	}
	dst.Data = column.Grow(dst.Data, size*int(n))
	for i := range src.Len {
		lo, hi := src.Offsets[i], src.Offsets[i+1]
		m := dst.Offsets[i+1] - dst.Offsets[i]
		if s.keepLast {
			lo = hi - m
		}
		copy(dst.Data[int(dst.Offsets[i])*size:], src.Data[int(lo)*size:int(lo+m)*size])
	}
	return nil
}

// limitOr is the step's row limit, or the longest a row can be.
func (s *weightsStep) limitOr(src *column.Column) int {
	if s.limit > 0 {
		return s.limit
	}
	return int(src.Offsets[src.Len])
}
