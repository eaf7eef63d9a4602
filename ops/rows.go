package ops

import (
	"unsafe"

	"github.com/lastmile/lastmile/column"
)

// Row movement: gathering, compacting and copying whole columns.

// gatherColumn sets dst to the rows sel of src, reusing dst's buffers.
func gatherColumn(dst, src *column.Column, sel []int32) {
	dst.Name, dst.Kind, dst.DType, dst.Width, dst.Len = src.Name, src.Kind, src.DType, src.Width, len(sel)
	size := src.DType.Size()
	switch src.Kind {
	case column.Fixed:
		w := size * src.Width
		dst.Data = column.Grow(dst.Data, len(sel)*w)
		dst.Offsets = nil
		switch w {
		case 8:
			d, s := u64s(dst.Data), u64s(src.Data)
			for j, r := range sel {
				d[j] = s[r]
			}
		case 4:
			d, s := u32s(dst.Data), u32s(src.Data)
			for j, r := range sel {
				d[j] = s[r]
			}
		default:
			for j, r := range sel {
				copy(dst.Data[j*w:(j+1)*w], src.Data[int(r)*w:int(r+1)*w])
			}
		}
	default:
		dst.Offsets = growI64(dst.Offsets, len(sel)+1)
		dst.Offsets[0] = 0
		var n int64
		for j, r := range sel {
			n += src.Offsets[r+1] - src.Offsets[r]
			dst.Offsets[j+1] = n
		}
		dst.Data = column.Grow(dst.Data, int(n)*size)
		es := int64(size)
		for j := 0; j < len(sel); {
			r, k := int(sel[j]), run(sel, j)
			copy(dst.Data[dst.Offsets[j]*es:], src.Data[src.Offsets[r]*es:src.Offsets[r+k-j]*es])
			j = k
		}
	}
	if src.Valid == nil {
		dst.Valid = nil
		return
	}
	dst.Valid = column.Grow(dst.Valid, len(sel))
	for j, r := range sel {
		dst.Valid[j] = src.Valid[r]
	}
}

// compactColumn keeps the rows sel (strictly increasing) of c, in place.
// Runs of consecutive rows move with one copy.
func compactColumn(c *column.Column, sel []int32) {
	size := c.DType.Size()
	switch {
	case c.Kind == column.Fixed && size*c.Width == 8:
		d := u64s(c.Data)
		for j, r := range sel {
			d[j] = d[r]
		}
		c.Data = c.Data[:len(sel)*8]
	case c.Kind == column.Fixed && size*c.Width == 4:
		d := u32s(c.Data)
		for j, r := range sel {
			d[j] = d[r]
		}
		c.Data = c.Data[:len(sel)*4]
	case c.Kind == column.Fixed:
		w := size * c.Width
		for j := 0; j < len(sel); {
			r, k := int(sel[j]), run(sel, j)
			copy(c.Data[j*w:], c.Data[r*w:(r+k-j)*w])
			j = k
		}
		c.Data = c.Data[:len(sel)*w]
	default:
		es := int64(size)
		off := c.Offsets
		var n int64
		for j := 0; j < len(sel); {
			r, k := int(sel[j]), run(sel, j)
			lo, hi := off[r], off[r+k-j]
			copy(c.Data[n*es:], c.Data[lo*es:hi*es])
			// Rows before j are done and r >= j: the offsets read here are
			// not yet overwritten.
			for t := range k - j {
				off[j+t] = n + off[r+t] - lo
			}
			n += hi - lo
			j = k
		}
		off[len(sel)] = n
		c.Offsets = off[:len(sel)+1]
		c.Data = c.Data[:n*es]
	}
	if c.Valid != nil {
		for j, r := range sel {
			c.Valid[j] = c.Valid[r]
		}
		c.Valid = c.Valid[:len(sel)]
	}
	c.Len = len(sel)
}

// run returns the end of the run of consecutive rows starting at sel[j].
func run(sel []int32, j int) int {
	k := j + 1
	for k < len(sel) && sel[k] == sel[k-1]+1 {
		k++
	}
	return k
}

// copyColumn sets dst to a copy of src, reusing dst's buffers.
func copyColumn(dst, src *column.Column) {
	dst.Name, dst.Kind, dst.DType, dst.Width, dst.Len = src.Name, src.Kind, src.DType, src.Width, src.Len
	dst.Data = append(dst.Data[:0], src.Data...)
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
}

// Typed views of byte buffers whose length is a multiple of the element
// size.

func u64s(b []byte) []uint64 {
	if len(b) < 8 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)
}

func u32s(b []byte) []uint32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

func i32s(b []byte) []int32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

func f32s(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

func growI64(b []int64, n int) []int64 {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]int64, n, n+n/8)
}

func growI32(b []int32, n int) []int32 {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]int32, n, n+n/8)
}

// ones returns a validity buffer of n valid rows, reusing b.
func ones(b []byte, n int) []byte {
	b = column.Grow(b, n)
	for i := range b {
		b[i] = 1
	}
	return b
}

func unsafePtr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }
