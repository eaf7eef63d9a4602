package decode

import (
	"io"
	"math"

	"github.com/parquet-go/parquet-go/format"
)

// Skipping the pages a selection does not touch, by the OffsetIndex.
//
// A late column decoded for a selection (DecodeColumn with a non-nil sel)
// needs only the data pages holding a selected row. Page headers tell a
// v2 page's row count (and a v1 page's, for columns without repetition),
// so such a page can be skipped undecompressed once its header is read;
// but its bytes have been read by then, with the window around it. The
// Parquet page index's OffsetIndex gives every data page's offset, size
// and first row up front, for v1 and v2 pages alike. With it the decoder
// walks the pages by the index: a page holding no selected row is jumped
// over without a read, and each read window is cut at the end of the run
// of pages that do hold one, so the skipped bytes never leave the file.
//
// The index is the writer's word, and the rows after a skipped page are
// counted from it: it must describe the pages of the chunk's byte range in
// order, a decoded page must start at the row the index says and hold the
// rows it says, and a page skipped before a selected row has its header
// read (headerProbe bytes, its body left unread) and checked likewise
// (checkIndexedPage), else the unit fails as corrupt. An index that does
// not fit the chunk's range is ignored and the pages are walked by their
// headers.

// Stats counts a decoder's pages since it was made.
type Stats struct {
	// Pages is the data pages decoded, wholly or in part.
	Pages int64 `json:"pages"`
	// PagesSkipped is the data pages a selection skipped without
	// decompressing them; PagesUnread those of them not read (found by
	// the OffsetIndex) but for their header, and BytesUnread their
	// compressed bytes not read.
	PagesSkipped int64 `json:"pages_skipped"`
	PagesUnread  int64 `json:"pages_unread"`
	BytesUnread  int64 `json:"bytes_unread"`
}

// Add adds o's counts to s.
func (s *Stats) Add(o Stats) {
	s.Pages += o.Pages
	s.PagesSkipped += o.PagesSkipped
	s.PagesUnread += o.PagesUnread
	s.BytesUnread += o.BytesUnread
}

// Stats returns the decoder's page counts so far.
func (d *Decoder) Stats() Stats { return d.stats }

// pageLoc is one data page of a unit's chunk, from the OffsetIndex: its
// bytes [off, end) and its first row within the row group.
type pageLoc struct{ off, end, first int64 }

// pageIndex returns the data pages of chunk c's byte range from its
// OffsetIndex, or nil when it has none or the index does not fit the
// range. It reuses d.locs.
func (d *Decoder) pageIndex(c *Chunk) ([]pageLoc, error) {
	if c.IndexLen <= 0 {
		return nil, nil
	}
	d.idxRaw = growBytes(d.idxRaw, int(c.IndexLen))
	if err := readFull(withContext(d.ctx, d.file), d.idxRaw, c.Index); err != nil {
		return nil, err
	}
	var oi format.OffsetIndex
	if err := unmarshalThrift(d.idxRaw, &oi); err != nil {
		return nil, nil // unreadable: walk the pages by their headers
	}
	locs := d.locs[:0]
	for _, l := range oi.PageLocations {
		end := l.Offset + int64(l.CompressedPageSize)
		if l.Offset < c.Offset || end > c.End {
			continue // a page of the row group outside this unit's range
		}
		if l.CompressedPageSize <= 0 || (len(locs) > 0 && (l.Offset < locs[len(locs)-1].end || l.FirstRowIndex <= locs[len(locs)-1].first)) {
			return nil, nil
		}
		locs = append(locs, pageLoc{off: l.Offset, end: end, first: l.FirstRowIndex})
	}
	d.locs = locs
	if len(locs) == 0 || locs[0].first != c.FirstRow {
		return nil, nil
	}
	return locs, nil
}

// fieldPageIndex is pageIndex for field fi's chunk of the open unit,
// read and parsed once per unit: PrefetchSelected and the decode that
// follows both walk it, and from object storage each read of an index
// outside the file's cached tail is a request.
func (d *Decoder) fieldPageIndex(fi int) ([]pageLoc, error) {
	if len(d.locsSet) != len(d.fields) {
		d.locsSet, d.locsBy = make([]bool, len(d.fields)), make([][]pageLoc, len(d.fields))
	}
	if d.locsSet[fi] {
		if len(d.locsBy[fi]) == 0 {
			return nil, nil
		}
		return d.locsBy[fi], nil
	}
	locs, err := d.pageIndex(&d.unit.Chunks[fi])
	if err != nil {
		return nil, err
	}
	d.locsBy[fi], d.locsSet[fi] = append(d.locsBy[fi][:0], locs...), true
	if locs == nil {
		return nil, nil
	}
	return d.locsBy[fi], nil
}

// pageEnd is the row after page k's last (past the last page: no bound).
func pageEnd(locs []pageLoc, k int) int64 {
	if k+1 < len(locs) {
		return locs[k+1].first
	}
	return math.MaxInt64
}

// holdsSelected reports whether rows [first, end) of the row group hold a
// selected row, sel counting from lo; si is the first entry of sel not
// before first, advanced past the rows before first.
func holdsSelected(sel []int32, si *int, lo, first, end int64) bool {
	for *si < len(sel) && lo+int64(sel[*si]) < first {
		*si++
	}
	return *si < len(sel) && lo+int64(sel[*si]) < end
}

// runEnd returns the end offset of the run of pages from k on that each
// hold a selected row (page k does); si as in holdsSelected, not advanced.
func runEnd(locs []pageLoc, k int, sel []int32, si int, lo int64) int64 {
	end := locs[k].end
	for j := k + 1; j < len(locs) && holdsSelected(sel, &si, lo, locs[j].first, pageEnd(locs, j)); j++ {
		end = locs[j].end
	}
	return end
}

// skipByIndex is called before reading the next page of a selection walk
// with an index. At an indexed page holding no selected row it moves the
// reader past the page unread and returns the row after it, skip true;
// otherwise it bounds the reader's windows to the run of wanted pages
// starting there. k is the next page of locs to reach.
func (d *Decoder) skipByIndex(f *Field, locs []pageLoc, k *int, pr *pageReader, sel []int32, si *int, lo, row int64) (next int64, skip bool, err error) {
	if !pr.settle() || pr.ri != 1 {
		return row, false, nil // no page left, or the dictionary range
	}
	for *k < len(locs) && locs[*k].off < pr.off {
		*k++
	}
	if *k == len(locs) {
		return row, false, nil
	}
	l := locs[*k]
	if l.off != pr.off {
		// A page the index does not list (the dictionary page at the
		// chunk's start): read no further than the next listed one.
		pr.limit = l.off
		return row, false, nil
	}
	if row != l.first {
		return row, false, corruptf("page at offset %d starts at row %d, its offset index says %d", l.off, row, l.first)
	}
	end := pageEnd(locs, *k)
	rows := int64(-1) // the page's rows by the index, where it tells
	if end != math.MaxInt64 {
		rows = end - l.first
	} else if gr := d.unit.GroupRowCount; gr > 0 && d.unit.RowStart+d.unit.Rows == gr {
		rows = gr - l.first // the row group's last page
	}
	if !holdsSelected(sel, si, lo, l.first, end) {
		// The rows after it are counted from the index's word: its
		// header (a small read, the body left unread) must agree.
		hn, err := indexedHeader(withContext(d.ctx, d.file), &d.hdrRaw, l.off, l.end-l.off, &d.skipHdr)
		if err != nil {
			return row, false, err
		}
		if err := checkIndexedPage(f, &d.skipHdr, hn, l.off, l.end-l.off, rows); err != nil {
			return row, false, err
		}
		pr.off = l.end
		d.stats.PagesSkipped++
		d.stats.PagesUnread++
		d.stats.BytesUnread += l.end - l.off - int64(len(d.hdrRaw))
		*k++
		return end, true, nil
	}
	if pr.off >= pr.limit {
		pr.limit = runEnd(locs, *k, sel, *si, lo)
	}
	d.idxAt, d.idxRows, d.idxSet = l, rows, true
	*k++
	return row, false, nil
}

// headerProbe is how much of a page indexedHeader reads first: a page
// header is usually a few dozen bytes.
const headerProbe = 256

// indexedHeader reads the header of the page at off, of size bytes with
// its header (as an OffsetIndex lists it), into h: a small read
// (headerProbe bytes), more only if the header does not fit, never past
// the page. buf is reused, and holds what was read.
func indexedHeader(f io.ReaderAt, buf *[]byte, off, size int64, h *pageHeader) (int, error) {
	for n := min(int64(headerProbe), size); ; n = min(n*16, size) {
		*buf = growBytes(*buf, int(n))
		if err := readFull(f, *buf, off); err != nil {
			return 0, err
		}
		hn, err := parsePageHeader(*buf, h)
		if err == nil {
			return hn, nil
		}
		if n == size {
			return 0, corruptf("offset index lists a page at offset %d whose header does not parse: %v", off, err)
		}
	}
}

// checkIndexedPage checks the page at off, whose header h (of hn bytes)
// was read, against what the OffsetIndex says of it: a data page of size
// bytes with its header, holding rows rows (-1: not known). A v2 page tells its rows, a
// v1 page of a non-repeated column too (one value a row); a v1 page of a
// list column only that it has at least a level a row.
func checkIndexedPage(f *Field, h *pageHeader, hn int, off, size, rows int64) error {
	if h.typ != pageData && h.typ != pageDataV2 {
		return corruptf("offset index lists the page at offset %d as a data page; its header says page type %d", off, h.typ)
	}
	if int64(hn)+int64(h.compressed) != size {
		return corruptf("offset index says the page at offset %d takes %d bytes; its header says %d", off, size, int64(hn)+int64(h.compressed))
	}
	got, exact := pageRows(f, h), true
	if got < 0 {
		got, exact = int64(h.numValues), false
	}
	if rows >= 0 && ((exact && got != rows) || (!exact && got < rows)) {
		return corruptf("offset index says the page at offset %d holds %d rows; its header says %d: the file's page index is wrong (rewrite the file)", off, rows, got)
	}
	return nil
}
