package decode

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The RLE/bit-packed hybrid encoding carries repetition and definition
// levels, dictionary indexes and RLE booleans:
//
//	run := bit-packed-run | rle-run
//	header := varint; header&1 == 1: (header>>1) groups of 8 values packed
//	          at width bits each; header&1 == 0: (header>>1) copies of one
//	          value stored little-endian in ceil(width/8) bytes.
//
// The decoders below fill a fixed number of outputs and fail on input that
// ends early; bit-packed runs may pad the final group past the count wanted.

var errHybrid = errors.New("malformed RLE/bit-packed data")

// unpack1 maps a byte to 8 bytes, each one bit of it, LSB first.
var unpack1 = func() (t [256]uint64) {
	for b := range 256 {
		var v uint64
		for i := range 8 {
			v |= uint64(b>>i&1) << (8 * i)
		}
		t[b] = v
	}
	return
}()

func hybridHeader(src []byte, pos int) (uint64, int, error) {
	h, n := binary.Uvarint(src[pos:])
	if n <= 0 {
		return 0, pos, errHybrid
	}
	return h, pos + n, nil
}

// decodeLevels decodes len(dst) values of width <= 8 bits into dst and
// returns the number of bytes of src consumed.
func decodeLevels(dst []uint8, src []byte, width uint) (int, error) {
	if width == 0 {
		clear(dst)
		return 0, nil
	}
	if width > 8 {
		return 0, fmt.Errorf("%w: level bit width %d", errHybrid, width)
	}
	pos, out := 0, 0
	mask := uint64(1)<<width - 1
	for out < len(dst) {
		h, p, err := hybridHeader(src, pos)
		if err != nil {
			return 0, err
		}
		pos = p
		if h&1 == 0 { // RLE run
			n := h >> 1
			if pos >= len(src) {
				return 0, errHybrid
			}
			v := src[pos]
			pos++
			if uint64(v) > mask {
				return 0, fmt.Errorf("%w: level %d wider than %d bits", errHybrid, v, width)
			}
			m := min(n, uint64(len(dst)-out))
			if m == 0 && n == 0 {
				return 0, fmt.Errorf("%w: empty run", errHybrid)
			}
			fill(dst[out:out+int(m)], v)
			out += int(m)
			continue
		}
		groups := h >> 1
		if groups == 0 || groups > uint64(len(src)) {
			return 0, fmt.Errorf("%w: bit-packed run of %d groups", errHybrid, groups)
		}
		nbytes := int(groups) * int(width)
		if nbytes > len(src)-pos {
			return 0, fmt.Errorf("%w: bit-packed run past the end", errHybrid)
		}
		run := src[pos : pos+nbytes]
		pos += nbytes
		nvals := min(int(groups)*8, len(dst)-out)
		d := dst[out : out+nvals]
		out += nvals
		if width == 1 {
			i := 0
			for ; i+8 <= len(d); i += 8 {
				binary.LittleEndian.PutUint64(d[i:], unpack1[run[i>>3]])
			}
			if i < len(d) {
				var tmp [8]byte
				binary.LittleEndian.PutUint64(tmp[:], unpack1[run[i>>3]])
				copy(d[i:], tmp[:])
			}
			continue
		}
		unpackBits8(d, run, width)
	}
	return pos, nil
}

func fill(d []uint8, v uint8) {
	if v == 0 {
		clear(d)
		return
	}
	if len(d) < 16 {
		for i := range d {
			d[i] = v
		}
		return
	}
	// Doubling copies run at memmove speed.
	d[0] = v
	for i := 1; i < len(d); i *= 2 {
		copy(d[i:], d[:i])
	}
}

// unpackBits8 unpacks len(d) values of width bits (<= 8) from run, which
// holds at least ceil(len(d)*width/8) bytes.
func unpackBits8(d []uint8, run []byte, width uint) {
	mask := uint64(1)<<width - 1
	bit := uint(0)
	for i := range d {
		byteIdx := bit >> 3
		var w uint64
		if int(byteIdx)+8 <= len(run) {
			w = binary.LittleEndian.Uint64(run[byteIdx:])
		} else {
			w = loadTail(run[byteIdx:])
		}
		d[i] = uint8(w >> (bit & 7) & mask)
		bit += width
	}
}

func loadTail(b []byte) uint64 {
	var w uint64
	for i := len(b) - 1; i >= 0; i-- {
		w = w<<8 | uint64(b[i])
	}
	return w
}

// decodeIndexes decodes len(dst) dictionary indexes of the given width
// (<= 32 bits) and returns the largest index seen (or -1 for none).
func decodeIndexes(dst []int32, src []byte, width uint) (int64, error) {
	if width > 32 {
		return 0, fmt.Errorf("%w: index bit width %d", errHybrid, width)
	}
	maxIdx := int64(-1)
	if width == 0 {
		clear(dst)
		if len(dst) > 0 {
			maxIdx = 0
		}
		return maxIdx, nil
	}
	pos, out := 0, 0
	vbytes := int(width+7) / 8
	for out < len(dst) {
		h, p, err := hybridHeader(src, pos)
		if err != nil {
			return 0, err
		}
		pos = p
		if h&1 == 0 {
			n := h >> 1
			if n == 0 {
				return 0, fmt.Errorf("%w: empty run", errHybrid)
			}
			if vbytes > len(src)-pos {
				return 0, errHybrid
			}
			v64 := loadTail(src[pos : pos+vbytes])
			pos += vbytes
			if v64 > 1<<31-1 {
				return 0, fmt.Errorf("%w: index out of range", errHybrid)
			}
			v := int32(v64)
			m := int(min(n, uint64(len(dst)-out)))
			d := dst[out : out+m]
			for i := range d {
				d[i] = v
			}
			out += m
			maxIdx = max(maxIdx, int64(v))
			continue
		}
		groups := h >> 1
		if groups == 0 || groups > uint64(len(src)) {
			return 0, fmt.Errorf("%w: bit-packed run of %d groups", errHybrid, groups)
		}
		nbytes := int(groups) * int(width)
		if nbytes > len(src)-pos {
			return 0, fmt.Errorf("%w: bit-packed run past the end", errHybrid)
		}
		run := src[pos : pos+nbytes]
		pos += nbytes
		nvals := min(int(groups)*8, len(dst)-out)
		d := dst[out : out+nvals]
		out += nvals
		m := unpackBits32(d, run, width)
		maxIdx = max(maxIdx, m)
	}
	return maxIdx, nil
}

// unpackBits32 unpacks len(d) values of width bits (<= 32) and returns
// their maximum.
func unpackBits32(d []int32, run []byte, width uint) int64 {
	mask := uint64(1)<<width - 1
	bit := uint(0)
	var m uint64
	i := 0
	// Fast part: an 8-byte load covers any value of <= 32 bits at any
	// bit offset when at least 8 bytes remain.
	for ; i < len(d); i++ {
		byteIdx := bit >> 3
		if int(byteIdx)+8 > len(run) {
			break
		}
		v := binary.LittleEndian.Uint64(run[byteIdx:]) >> (bit & 7) & mask
		if v > m {
			m = v
		}
		d[i] = int32(v)
		bit += width
	}
	for ; i < len(d); i++ {
		byteIdx := bit >> 3
		v := loadTail(run[byteIdx:min(int(byteIdx)+8, len(run))]) >> (bit & 7) & mask
		if v > m {
			m = v
		}
		d[i] = int32(v)
		bit += width
	}
	return int64(m)
}
