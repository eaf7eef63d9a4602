package ops

import (
	"unsafe"

	"github.com/lastmile/lastmile/column"
)

// stackStep computes a stack's [B, N] column from its members, already of
// the stack's dtype: member j of row r goes to element r*N+j. It runs in
// the workers, over a unit's rows; the packer then moves the [B, N]
// column into the ring slot as it moves any [B, L] column, and a shuffle
// gathers one contiguous row of N elements where N columns would need N
// scattered reads.
type stackStep struct {
	stepBase
	srcs []unsafe.Pointer
}

func (s *stackStep) clone() step { return &stackStep{stepBase: s.stepBase} }

func (s *stackStep) compute(f *frame) error {
	n := len(s.reads)
	first := f.vals[s.reads[0]]
	es := first.DType.Size()
	dst := f.dst(s.writes[0])
	dst.Kind, dst.DType, dst.Width, dst.Len, dst.Offsets, dst.Valid = column.Fixed, first.DType, n, f.rows, nil, nil
	dst.Data = column.Grow(dst.Data, f.rows*n*es)
	if f.rows == 0 {
		return nil
	}
	s.srcs = s.srcs[:0]
	for _, v := range s.reads {
		c := f.vals[v]
		if c.DType.Size() != es || len(c.Data) < f.rows*es {
			panic("BUG: stack member of another size or short")
		}
		s.srcs = append(s.srcs, unsafe.Pointer(unsafe.SliceData(c.Data)))
	}
	interleave(unsafe.Pointer(unsafe.SliceData(dst.Data)), s.srcs, es, f.rows)
	return nil
}

// interleave writes rows [0, rows) of the sources, elements of es bytes,
// to the [rows, N] matrix at d, source j to column j.
//
// It is the stack's whole cost, so it is written for speed: a block of
// rows at a time (about 32KiB of d, which stays in cache while the sources
// write into it, each read in order), no bounds checks (the caller checked
// the sizes), and for 4-byte elements 8x8 blocks transposed in AVX2
// registers where the CPU has it (transpose_amd64.s), else four sources
// of two rows read with four 8-byte loads and written with four 8-byte
// stores. BenchmarkStack compares it with copying the N columns.
func interleave(d unsafe.Pointer, srcs []unsafe.Pointer, es, rows int) {
	n := len(srcs)
	blk := max(8, 32768/(n*es))
	stride := n * es
	for b0 := 0; b0 < rows; b0 += blk {
		m := min(blk, rows-b0)
		j := 0
		for ; es == 4 && haveTranspose8x8 && j+8 <= n; j += 8 {
			transpose8x8(unsafe.Add(d, (b0*n+j)*4), uintptr(stride), &srcs[j], uintptr(b0)*4, uintptr(m/8))
			if r := m &^ 7; r < m {
				quad32(unsafe.Add(d, ((b0+r)*n+j)*4), stride, srcs[j:j+4], b0+r, m-r)
				quad32(unsafe.Add(d, ((b0+r)*n+j+4)*4), stride, srcs[j+4:j+8], b0+r, m-r)
			}
		}
		for ; es == 4 && j+4 <= n; j += 4 {
			quad32(unsafe.Add(d, (b0*n+j)*4), stride, srcs[j:j+4], b0, m)
		}
		for ; j < n; j++ {
			dst := unsafe.Add(d, (b0*n+j)*es)
			switch es {
			case 8:
				column1[uint64](dst, stride, srcs[j], b0, m)
			case 4:
				column1[uint32](dst, stride, srcs[j], b0, m)
			case 2:
				column1[uint16](dst, stride, srcs[j], b0, m)
			default:
				column1[uint8](dst, stride, srcs[j], b0, m)
			}
		}
	}
}

// quad32 writes m rows of four 4-byte sources, from row lo, as 16 bytes a
// row at d, d+stride, ...: two rows at a time, one 8-byte load from each
// source holding both rows' elements (little-endian: the first row in the
// low half).
func quad32(d unsafe.Pointer, stride int, srcs []unsafe.Pointer, lo, m int) {
	a, b, c, e := srcs[0], srcs[1], srcs[2], srcs[3]
	o, end := uintptr(lo)*4, uintptr(lo+m)*4
	const lowHalf = 0xffffffff
	// Pointers are formed only to bytes inside the buffers (checkptr).
	at := 0
	for ; o+8 <= end; o += 8 {
		x, y := *(*uint64)(unsafe.Add(a, o)), *(*uint64)(unsafe.Add(b, o))
		z, w := *(*uint64)(unsafe.Add(c, o)), *(*uint64)(unsafe.Add(e, o))
		*(*uint64)(unsafe.Add(d, at)) = x&lowHalf | y<<32
		*(*uint64)(unsafe.Add(d, at+8)) = z&lowHalf | w<<32
		*(*uint64)(unsafe.Add(d, at+stride)) = x>>32 | y&^lowHalf
		*(*uint64)(unsafe.Add(d, at+stride+8)) = z>>32 | w&^lowHalf
		at += 2 * stride
	}
	if o < end {
		*(*uint64)(unsafe.Add(d, at)) = uint64(*(*uint32)(unsafe.Add(a, o))) | uint64(*(*uint32)(unsafe.Add(b, o)))<<32
		*(*uint64)(unsafe.Add(d, at+8)) = uint64(*(*uint32)(unsafe.Add(c, o))) | uint64(*(*uint32)(unsafe.Add(e, o)))<<32
	}
}

// column1 writes m rows of one source of T elements, from row lo, to d,
// d+stride, ...
func column1[T uint8 | uint16 | uint32 | uint64](d unsafe.Pointer, stride int, src unsafe.Pointer, lo, m int) {
	var zero T
	es := int(unsafe.Sizeof(zero))
	for i := range m {
		*(*T)(unsafe.Add(d, i*stride)) = *(*T)(unsafe.Add(src, (lo+i)*es))
	}
}
