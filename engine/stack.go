package engine

import (
	"unsafe"
)

// fillStack writes a stack's [B, N] tensor into dst from its member
// columns, all of element size es: member j of row r goes to element
// r*N+j. Rows a span takes in order are transposed (interleave); rows a
// shuffle window permutes are gathered a row at a time (gatherStack).
func fillStack(dst []byte, es int, members []int, spans []span, tmp *packScratch) {
	n := len(members)
	srcs := make([]unsafe.Pointer, n)
	base := 0 // first output row of the span
	for k := range spans {
		sp := &spans[k]
		rows := sp.hi - sp.lo
		if rows == 0 {
			continue
		}
		if len(dst) < (base+rows)*n*es {
			panic("BUG: fillStack: the slot's tensor is short")
		}
		if sp.from != nil {
			stackFrom(dst[base*n*es:(base+rows)*n*es], es, members, sp, tmp)
			base += rows
			continue
		}
		for j, ci := range members {
			c := &sp.b.Columns[ci]
			if len(c.Data) < c.Len*es || c.Len < sp.b.Rows {
				panic("BUG: fillStack: a member is short")
			}
			srcs[j] = unsafe.Pointer(unsafe.SliceData(c.Data))
		}
		d := unsafe.Pointer(&dst[base*n*es])
		if sp.idx != nil {
			gatherStack(d, srcs, es, sp.idx[sp.lo:sp.hi])
		} else {
			for j := range srcs {
				srcs[j] = unsafe.Add(srcs[j], sp.lo*es)
			}
			interleave(d, srcs, es, rows)
		}
		base += rows
	}
}

// stackFrom writes the [rows, N] matrix of a span over several batches
// (a shuffle window, window.go) to dst: a source at a time, each of its
// rows gathered by gatherStack into scratch and copied to its place.
func stackFrom(dst []byte, es int, members []int, sp *span, tmp *packScratch) {
	stride := len(members) * es
	srcs := make([]unsafe.Pointer, len(members))
	scratch := tmp.rows
	for s, src := range sp.srcs {
		pos, rows := sp.by.pos[s], sp.by.rows[s]
		if len(rows) == 0 {
			continue
		}
		for m, ci := range members {
			c := &src.Columns[ci]
			if len(c.Data) < c.Len*es || c.Len < src.Rows {
				panic("BUG: fillStack: a member is short")
			}
			srcs[m] = unsafe.Pointer(unsafe.SliceData(c.Data))
		}
		if cap(scratch) < len(rows)*stride {
			scratch = make([]byte, len(rows)*stride)
		}
		scratch = scratch[:len(rows)*stride]
		tmp.rows = scratch
		gatherStack(unsafe.Pointer(&scratch[0]), srcs, es, rows)
		for k, p := range pos {
			copy(dst[int(p)*stride:int(p+1)*stride], scratch[k*stride:(k+1)*stride])
		}
	}
}

// gatherStack writes the rows idx of the sources, elements of es bytes,
// to the [len(idx), N] matrix at d. It goes a block of rows at a time
// (about 32KiB of d, which stays in cache), and within a block a few
// sources at a time (4-byte ones four at a time, into two 8-byte stores a
// row): each pass reads few sources, as the gather of a separate column
// reads one. A row-major gather, touching all N sources for every row,
// costs about three times as much; one source a pass, 30% more; four, about
// what gathering N separate columns costs (BenchmarkStackJob).
func gatherStack(d unsafe.Pointer, srcs []unsafe.Pointer, es int, idx []int32) {
	n := len(srcs)
	stride := n * es
	blk := max(8, 32768/stride)
	for b0 := 0; b0 < len(idx); b0 += blk {
		ix := idx[b0:min(b0+blk, len(idx))]
		j := 0
		for ; es == 4 && j+4 <= n; j += 4 {
			a, b, c, e := srcs[j], srcs[j+1], srcs[j+2], srcs[j+3]
			at := (b0*n + j) * 4
			for _, s := range ix {
				o := int(s) * 4
				*(*uint64)(unsafe.Add(d, at)) = uint64(*(*uint32)(unsafe.Add(a, o))) | uint64(*(*uint32)(unsafe.Add(b, o)))<<32
				*(*uint64)(unsafe.Add(d, at+8)) = uint64(*(*uint32)(unsafe.Add(c, o))) | uint64(*(*uint32)(unsafe.Add(e, o)))<<32
				at += stride
			}
		}
		for ; es == 4 && j+2 <= n; j += 2 {
			a, b := srcs[j], srcs[j+1]
			at := (b0*n + j) * 4
			for _, s := range ix {
				o := int(s) * 4
				*(*uint64)(unsafe.Add(d, at)) = uint64(*(*uint32)(unsafe.Add(a, o))) | uint64(*(*uint32)(unsafe.Add(b, o)))<<32
				at += stride
			}
		}
		for ; j < n; j++ {
			src, at := srcs[j], (b0*n+j)*es
			for _, s := range ix {
				dst, from := unsafe.Add(d, at), unsafe.Add(src, int(s)*es)
				switch es {
				case 8:
					*(*uint64)(dst) = *(*uint64)(from)
				case 4:
					*(*uint32)(dst) = *(*uint32)(from)
				case 2:
					*(*uint16)(dst) = *(*uint16)(from)
				default:
					*(*uint8)(dst) = *(*uint8)(from)
				}
				at += stride
			}
		}
	}
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
// stores. BenchmarkStackJob compares a job's CPU with N columns.
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
