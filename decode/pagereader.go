package decode

import (
	"hash/crc32"
	"io"
)

// readWindow is how much of a column chunk is read at a time. A window
// holds a few pages and stays in cache while they are decompressed, where
// reading a whole chunk (tens of MB for a sequence column) into memory
// first would write it to DRAM and read it back.
var readWindow int64 = 4 << 20

// pageReader yields the pages of a unit's column chunk: the dictionary
// range, then the page range, reading the file in windows with ReadAt.
// With a nil file, buf holds all the bytes (tests and fuzzing).
type pageReader struct {
	f      io.ReaderAt
	buf    []byte  // the window
	base   int64   // file offset of buf[0]
	ranges [2]span // the dictionary range (maybe empty), then the pages
	ri     int     // current range
	off    int64   // file offset of the next page header
	h      *pageHeader
	// limit, when past off, bounds what a window reads beyond the bytes
	// asked for: the end of the pages a selection wants (pageindex.go).
	limit int64
}

type span struct{ start, end int64 }

// reset points r at c's ranges in f, keeping its buffer.
func (r *pageReader) reset(f io.ReaderAt, c *Chunk, h *pageHeader) {
	*r = pageReader{f: f, buf: r.buf[:0], h: h,
		ranges: [2]span{{c.DictOffset, c.DictOffset + c.DictLen}, {c.Offset, c.End}}}
	if c.DictLen == 0 {
		r.ri = 1
	}
	r.off = r.ranges[r.ri].start
}

// resetBytes points r at raw, a chunk's bytes as stored (file offsets are
// then positions in raw).
func (r *pageReader) resetBytes(raw []byte, h *pageHeader) {
	*r = pageReader{buf: raw, h: h, ranges: [2]span{{}, {0, int64(len(raw))}}, ri: 1}
}

// bytes returns the n bytes at file offset off, reading a window when
// they are not loaded. What it returned before may be overwritten.
func (r *pageReader) bytes(off int64, n int) ([]byte, error) {
	if off >= r.base && off+int64(n) <= r.base+int64(len(r.buf)) {
		return r.buf[off-r.base : off-r.base+int64(n)], nil
	}
	end := r.ranges[r.ri].end
	if r.f == nil || off+int64(n) > end {
		return nil, corruptf("%d bytes at offset %d run past the column chunk (ends at %d)", n, off, end)
	}
	wend := end
	if r.limit > off {
		wend = min(end, max(r.limit, off+int64(n)))
	}
	size := int(min(max(int64(n), readWindow), wend-off))
	keep := 0
	if off >= r.base && off < r.base+int64(len(r.buf)) {
		keep = copy(r.buf, r.buf[off-r.base:]) // the tail already read
	}
	if cap(r.buf) < size {
		nb := make([]byte, size)
		copy(nb, r.buf[:keep])
		r.buf = nb
	}
	r.buf = r.buf[:size]
	if err := readFull(r.f, r.buf[keep:], off+int64(keep)); err != nil {
		return nil, err
	}
	r.base = off
	return r.buf[:n], nil
}

// settle moves the reader on to the page range once the dictionary range
// is done, and reports whether a page is left to read.
func (r *pageReader) settle() bool {
	for r.off >= r.ranges[r.ri].end {
		if r.ri == 1 {
			return false
		}
		r.ri = 1
		r.off = r.ranges[1].start
	}
	return true
}

// next parses the next page header into r.h and returns the page's file
// offset and body. ok is false after the last page.
func (r *pageReader) next() (off int64, body []byte, ok bool, err error) {
	if !r.settle() {
		return 0, nil, false, nil
	}
	off = r.off
	left := r.ranges[r.ri].end - off
	// Headers are small; ask for a little and more only if that fails.
	// The first ask stays within limit, so that a small page's header
	// does not read the skipped page after it.
	first := int64(256)
	if r.limit > off {
		first = min(first, r.limit-off)
	}
	var hn int
	for n := first; ; n *= 16 {
		n = min(n, left)
		b, err := r.bytes(off, int(n))
		if err != nil {
			return off, nil, false, err
		}
		if hn, err = parsePageHeader(b, r.h); err == nil {
			break
		}
		if n == left {
			return off, nil, false, corrupt(err)
		}
	}
	if int64(r.h.compressed) > left-int64(hn) {
		return off, nil, false, corruptf("page of %d bytes runs past the column chunk", r.h.compressed)
	}
	body, err = r.bytes(off+int64(hn), int(r.h.compressed))
	if err != nil {
		return off, nil, false, err
	}

	r.off = off + int64(hn) + int64(r.h.compressed)
	return off, body, true, nil
}

// checkCRC verifies a page's body against the CRC its header carries, if
// any: a byte flipped on disk or in transit (the file's size and mtime
// unchanged) must not reach a trainer as a wrong value. Pages skipped
// without being decoded are not checked: nothing of them is used.
func checkCRC(h *pageHeader, body []byte) error {
	if !h.hasCRC {
		return nil
	}
	if sum := crc32.ChecksumIEEE(body); sum != uint32(h.crc) {
		return corruptf("page CRC %08x, but its %d bytes hash to %08x: the file is damaged", uint32(h.crc), len(body), sum)
	}
	return nil
}
