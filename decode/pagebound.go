package decode

import (
	"encoding/binary"
	"errors"
)

// What a page's stored bytes can expand to, known before a buffer is made
// for them. A page header's uncompressed size is the writer's word, and
// the decoder sizes its buffers by it: without a bound a few hostile bytes
// could make a worker of a shared daemon allocate, and zero, up to
// maxPageBytes. Each codec is bounded by its own format:
//
//   - snappy, DEFLATE and LZ4 have a densest element, hence a fixed
//     ratio (maxExpand);
//   - zstd says, frame by frame, how large each block is: a raw or RLE
//     block gives its size, a compressed one holds at most 128 KiB
//     (zstdBound, from the block headers alone, without decompressing);
//   - brotli says nothing a reader can use before it decodes, so a
//     brotli page that claims more than 32 bytes for each stored one
//     (past the first MiB) is decoded first into a buffer that grows
//     only as the stream gives bytes (decompressor.holdBrotli), and its
//     values are copied from there; other brotli pages, all real ones
//     but the most compressible, decompress in place like any other.
//
// The decode that follows is held to the header's size too (zstd's
// DecodeAll to its buffer's capacity, the streams by readExactly), so a
// page whose bytes hold more than its header says fails without growing
// anything.

// checkPageSize refuses a dictionary or data page whose header says it
// holds more than its stored bytes can expand to.
func checkPageSize(c *Chunk, h *pageHeader, body []byte) error {
	if h.typ != pageDictionary && h.typ != pageData && h.typ != pageDataV2 {
		return nil
	}
	most, err := pageBound(c.Codec, h, body)
	if err != nil {
		return err
	}
	if int64(h.uncompressed) > min(most, maxPageBytes) {
		return corruptf("page of %d stored bytes says it holds %d, more than %s can expand them to (%d)",
			len(body), h.uncompressed, codecName(c.Codec), most)
	}
	return nil
}

// pageBound returns the most bytes a page's body can hold once
// decompressed with codec: a v2 page's levels as stored, its values by
// the codec's bound, or as stored when the page says they are not
// compressed.
func pageBound(codec int32, h *pageHeader, body []byte) (int64, error) {
	if h.typ != pageDataV2 {
		return codecBound(codec, body)
	}
	lv := int(h.repLen) + int(h.defLen)
	if lv < 0 || lv > len(body) {
		return 0, corruptf("v2 page: levels of %d bytes in a page of %d", lv, len(body))
	}
	if !h.isCompressed {
		return int64(len(body)), nil
	}
	n, err := codecBound(codec, body[lv:])
	return int64(lv) + n, err
}

// codecBound is the most that src can decompress to with codec.
func codecBound(codec int32, src []byte) (int64, error) {
	switch codec {
	case codecZstd:
		n, err := zstdBound(src)
		if err != nil {
			return 0, corrupt(err)
		}
		return n, nil
	case codecBrotli:
		return maxPageBytes, nil // held to its real size by holdBrotli
	}
	return maxExpand(codec, len(src)), nil
}

// maxExpand is the most a page body of n stored bytes can hold
// uncompressed with codec, by the codec's own format: snappy's densest
// element is a 3-byte copy of 64 bytes, DEFLATE's best ratio is 1032:1,
// and each LZ4 length byte adds at most 255.
func maxExpand(codec int32, n int) int64 {
	m := int64(n)
	switch codec {
	case codecNone:
		return m
	case codecSnappy:
		return m*22 + 64
	case codecGzip:
		return m*1032 + 1024
	case codecLz4, codecLz4Raw:
		return m*256 + 64
	}
	return maxPageBytes
}

// zstd's format (RFC 8878, section 3.1).
const (
	zstdMagic         = 0xFD2FB528
	zstdSkippableMask = 0xFFFFFFF0
	zstdSkippable     = 0x184D2A50
	zstdBlockMax      = 128 << 10 // a block never holds more (Block_Maximum_Size)
)

var errZstdTruncated = errors.New("zstd: frame ends before its last block")

// zstdBound returns the most bytes the zstd frames in src can decompress
// to, read from their headers: a raw or RLE block's size is in its
// header, a compressed block holds at most 128 KiB, a frame no more than
// its content size when it gives one, and a skippable frame nothing. It
// reads a few bytes per block and allocates nothing. Fewer than four bytes
// after the last frame are left to the decoder, which ignores them as
// padding or fails on them; anything else that is not a frame is an
// error here, as it is there.
func zstdBound(src []byte) (int64, error) {
	var total int64
	for len(src) >= 4 {
		magic := binary.LittleEndian.Uint32(src)
		if magic&zstdSkippableMask == zstdSkippable {
			if len(src) < 8 {
				return 0, errZstdTruncated
			}
			n := uint64(binary.LittleEndian.Uint32(src[4:]))
			if n > uint64(len(src)-8) {
				return 0, errZstdTruncated
			}
			src = src[8+n:]
			continue
		}
		if magic != zstdMagic {
			return 0, errors.New("zstd: bytes that are not a zstd frame")
		}
		n, rest, err := zstdFrameBound(src[4:])
		if err != nil {
			return 0, err
		}
		total += n
		src = rest
	}
	return total, nil
}

// zstdFrameBound bounds one frame, src starting after its magic number,
// and returns the bytes after it.
func zstdFrameBound(src []byte) (int64, []byte, error) {
	if len(src) < 1 {
		return 0, nil, errZstdTruncated
	}
	fhd := src[0]
	if fhd&(1<<3) != 0 {
		return 0, nil, errors.New("zstd: reserved bit set in a frame header")
	}
	single := fhd&(1<<5) != 0
	hdr := 1
	if !single {
		hdr++ // Window_Descriptor
	}
	hdr += [4]int{0, 1, 2, 4}[fhd&3] // Dictionary_ID
	fcsLen := [4]int{0, 2, 4, 8}[fhd>>6]
	if fcsLen == 0 && single {
		fcsLen = 1
	}
	if len(src) < hdr+fcsLen {
		return 0, nil, errZstdTruncated
	}
	fcs := int64(-1)
	if b := src[hdr : hdr+fcsLen]; fcsLen > 0 {
		var v uint64
		for i := len(b) - 1; i >= 0; i-- {
			v = v<<8 | uint64(b[i])
		}
		if fcsLen == 2 {
			v += 256
		}
		fcs = int64(min(v, 1<<62))
	}
	n, rest, err := zstdBlocksBound(src[hdr+fcsLen:])
	if err != nil {
		return 0, nil, err
	}
	if fhd&(1<<2) != 0 { // Content_Checksum
		if len(rest) < 4 {
			return 0, nil, errZstdTruncated
		}
		rest = rest[4:]
	}
	if fcs >= 0 {
		n = min(n, fcs)
	}
	return n, rest, nil
}

// zstdBlocksBound bounds a frame's blocks and returns the bytes after the
// last one.
func zstdBlocksBound(src []byte) (int64, []byte, error) {
	var n int64
	for {
		if len(src) < 3 {
			return 0, nil, errZstdTruncated
		}
		bh := uint32(src[0]) | uint32(src[1])<<8 | uint32(src[2])<<16
		last, typ, size := bh&1 != 0, (bh>>1)&3, int(bh>>3)
		src = src[3:]
		stored := size
		switch typ {
		case 0: // raw
			n += int64(size)
		case 1: // RLE: one byte, repeated size times
			stored = 1
			n += int64(size)
		case 2: // compressed
			n += zstdBlockMax
		default:
			return 0, nil, errors.New("zstd: reserved block type")
		}
		if stored > len(src) {
			return 0, nil, errZstdTruncated
		}
		src = src[stored:]
		if last {
			return n, src, nil
		}
	}
}

// brotliDirect is the most a brotli page of n stored bytes may claim and
// still be decompressed straight into buffers sized by its header: at
// most 32 bytes of buffer for each byte a writer supplies, past the
// first MiB, the amplification snappy's format allows. Real pages
// compress 3-10:1; a page of zeros claims more and is held.
func brotliDirect(n int) int64 { return 32*int64(n) + 1<<20 }

// holdPage decodes a brotli page that claims more than brotliDirect
// ahead into the decompressor's own buffer (holdBrotli), before any
// buffer is sized by its header.
func (d *Decoder) holdPage(c *Chunk, h *pageHeader, body []byte) error {
	if c.Codec != codecBrotli {
		return nil
	}
	want := int(h.uncompressed)
	if h.typ == pageDataV2 {
		if !h.isCompressed {
			return nil
		}
		lv := int(h.repLen) + int(h.defLen)
		if lv > len(body) || lv > want {
			return nil // appendPage reports it
		}
		body, want = body[lv:], want-lv
	}
	if int64(want) <= brotliDirect(len(body)) {
		return nil
	}
	if err := d.z.holdBrotli(body, want); err != nil {
		return corrupt(err)
	}
	return nil
}
