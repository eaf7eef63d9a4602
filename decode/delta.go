package decode

import (
	"encoding/binary"
	"errors"
	"fmt"
)

var errDelta = errors.New("malformed DELTA_BINARY_PACKED data")

// deltaHeader reads a DELTA_BINARY_PACKED header.
func deltaHeader(src []byte) (blockSize, miniblocks, total uint64, first int64, pos int, err error) {
	var n int
	if blockSize, n = binary.Uvarint(src); n <= 0 {
		return 0, 0, 0, 0, 0, errDelta
	}
	pos = n
	if miniblocks, n = binary.Uvarint(src[pos:]); n <= 0 {
		return 0, 0, 0, 0, 0, errDelta
	}
	pos += n
	if total, n = binary.Uvarint(src[pos:]); n <= 0 {
		return 0, 0, 0, 0, 0, errDelta
	}
	pos += n
	if first, n = binary.Varint(src[pos:]); n <= 0 {
		return 0, 0, 0, 0, 0, errDelta
	}
	pos += n
	if blockSize == 0 || blockSize%128 != 0 || blockSize > 1<<20 || miniblocks == 0 ||
		blockSize%miniblocks != 0 || (blockSize/miniblocks)%32 != 0 {
		return 0, 0, 0, 0, 0, fmt.Errorf("%w: block of %d values in %d miniblocks", errDelta, blockSize, miniblocks)
	}
	return blockSize, miniblocks, total, first, pos, nil
}

// decodeDelta decodes DELTA_BINARY_PACKED values into dst (exactly
// len(dst) of them, which the header must agree with) and returns the
// bytes consumed. Arithmetic wraps, so INT32 columns decode correctly
// after truncation.
func decodeDelta(dst []int64, src []byte) (int, error) {
	blockSize, miniblocks, total, first, pos, err := deltaHeader(src)
	if err != nil {
		return 0, err
	}
	if total != uint64(len(dst)) {
		return 0, fmt.Errorf("%w: %d values, page wants %d", errDelta, total, len(dst))
	}
	if len(dst) == 0 {
		return pos, nil
	}
	dst[0] = first
	prev := first
	out := 1
	per := int(blockSize / miniblocks)
	for out < len(dst) {
		minDelta, n := binary.Varint(src[pos:])
		if n <= 0 {
			return 0, errDelta
		}
		pos += n
		if uint64(len(src)-pos) < miniblocks {
			return 0, errDelta
		}
		widths := src[pos : pos+int(miniblocks)]
		pos += int(miniblocks)
		for _, w := range widths {
			if out >= len(dst) {
				break
			}
			if w > 64 {
				return 0, fmt.Errorf("%w: bit width %d", errDelta, w)
			}
			nbytes := per * int(w) / 8
			if nbytes > len(src)-pos {
				return 0, fmt.Errorf("%w: miniblock past the end", errDelta)
			}
			mb := src[pos : pos+nbytes]
			pos += nbytes
			m := min(per, len(dst)-out)
			bit := uint(0)
			for i := range m {
				v := readBits(mb, bit, uint(w))
				bit += uint(w)
				prev += minDelta + int64(v)
				dst[out+i] = prev
			}
			out += m
		}
	}
	return pos, nil
}

// readBits reads width (<= 64) bits LSB-first from b at bit offset bit.
func readBits(b []byte, bit, width uint) uint64 {
	if width == 0 {
		return 0
	}
	var v uint64
	got := uint(0)
	i := bit >> 3
	shift := bit & 7
	for got < width {
		v |= uint64(b[i]>>shift) << got
		got += 8 - shift
		shift = 0
		i++
	}
	if width < 64 {
		v &= 1<<width - 1
	}
	return v
}

// decodeDeltaLengths decodes the lengths of a DELTA_LENGTH_BYTE_ARRAY (or
// the suffix part of DELTA_BYTE_ARRAY) section into d.lens.
func (d *Decoder) deltaInts(n int, src []byte) ([]int64, int, error) {
	if cap(d.lens) < n {
		d.lens = make([]int64, n, n+n/8)
	}
	v := d.lens[:n]
	p, err := decodeDelta(v, src)
	return v, p, err
}

// deltaLengthBytes appends the n values of a DELTA_LENGTH_BYTE_ARRAY
// section to data, calling put after each with the new length.
func (d *Decoder) deltaLengthBytes(n int, src []byte, data []byte, put func(i int, data []byte)) ([]byte, error) {
	lens, p, err := d.deltaInts(n, src)
	if err != nil {
		return nil, err
	}
	for i, l := range lens {
		if l < 0 || l > int64(len(src)-p) {
			return nil, fmt.Errorf("%w: byte array of %d bytes past the end", errDelta, l)
		}
		data = append(data, src[p:p+int(l)]...)
		p += int(l)
		put(i, data)
	}
	return data, nil
}

// deltaBytes appends the n values of a DELTA_BYTE_ARRAY section (shared
// prefix lengths, then suffixes as DELTA_LENGTH_BYTE_ARRAY) to data.
func (d *Decoder) deltaBytes(n int, src []byte, data []byte, put func(i int, data []byte)) ([]byte, error) {
	if cap(d.prefix) < n {
		d.prefix = make([]int64, n, n+n/8)
	}
	prefix := d.prefix[:n]
	p, err := decodeDelta(prefix, src)
	if err != nil {
		return nil, err
	}
	lens, q, err := d.deltaInts(n, src[p:])
	if err != nil {
		return nil, err
	}
	p += q
	prevStart, prevEnd := 0, 0
	for i, l := range lens {
		pre := prefix[i]
		if l < 0 || l > int64(len(src)-p) || pre < 0 || pre > int64(prevEnd-prevStart) {
			return nil, fmt.Errorf("%w: bad prefix or suffix length", errDelta)
		}
		start := len(data)
		data = append(data, data[prevStart:prevStart+int(pre)]...)
		data = append(data, src[p:p+int(l)]...)
		p += int(l)
		prevStart, prevEnd = start, len(data)
		put(i, data)
	}
	return data, nil
}
