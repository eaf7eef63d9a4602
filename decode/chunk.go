package decode

import (
	"math"

	"github.com/lastmile/lastmile/column"
)

// maxPageBytes bounds a page's uncompressed size, so that a corrupt
// header cannot make the decoder allocate without limit.
const maxPageBytes = 1 << 30

// resetColumn prepares col to receive field f's rows, keeping its buffers.
// While decoding, a nullable field's Valid always has Len bytes; finish
// drops it when no row is null.
func (d *Decoder) resetColumn(fi int, col *column.Column) {
	f := &d.fields[fi]
	col.Name, col.Kind, col.DType, col.Width, col.Len = f.Name, f.Kind, f.DType, 1, 0
	col.Data = col.Data[:0]
	if f.Kind == column.Fixed {
		col.Offsets = nil
	} else {
		col.Offsets = append(col.Offsets[:0], 0)
	}
	if f.Nullable {
		if col.Valid == nil && fi < len(d.stash) {
			col.Valid, d.stash[fi] = d.stash[fi], nil
		}
		col.Valid = col.Valid[:0]
	} else {
		col.Valid = nil
	}
}

// finishColumn applies the rule that Valid is nil when every row is valid,
// setting an all-valid buffer aside for the field's next unit.
func (d *Decoder) finishColumn(fi int, col *column.Column) {
	if col.Valid == nil {
		return
	}
	for _, v := range col.Valid {
		if v == 0 {
			return
		}
	}
	if fi < len(d.stash) {
		d.stash[fi] = col.Valid[:0]
	}
	col.Valid = nil
}

// decodeColumn walks the pages of field fi's chunk, decoding those that
// hold rows of the unit (and of sel, when given).
//
// Rows are counted within the row group: the unit wants [lo, hi), the page
// at hand starts at row. A page wholly inside the wanted rows is decoded
// straight into dst; one that is only partly wanted (the head of a slice
// cut mid-page, or a selection) is decoded into d.scratch and the wanted
// rows copied. A page that overruns hi is decoded into dst and the excess
// rows cut off.
func (d *Decoder) decodeColumn(fi int, sel []int32, dst *column.Column) error {
	c := &d.unit.Chunks[fi]
	d.resetColumn(fi, dst)
	if c.Absent {
		n := int(d.unit.Rows)
		if sel != nil {
			n = len(sel)
		}
		if c.Default != nil {
			if err := appendDefault(dst, n, c.Default); err != nil {
				return d.errorf(fi, -1, err)
			}
			return nil
		}
		appendNulls(dst, n)
		return nil
	}
	d.pr.reset(withContext(d.ctx, d.file), c, &d.hdr)
	if err := d.decodePages(fi, c, &d.pr, sel, dst); err != nil {
		return err
	}
	d.finishColumn(fi, dst)
	return nil
}

// decodePages decodes the pages pr yields into dst, which resetColumn
// prepared.
func (d *Decoder) decodePages(fi int, c *Chunk, pr *pageReader, sel []int32, dst *column.Column) error {
	f := &d.fields[fi]
	d.dict.reset()
	lo := d.unit.RowStart
	hi := lo + d.unit.Rows
	want := d.reserveColumn(f, c, sel, dst)
	si := 0 // next entry of sel to place
	row := c.FirstRow
	done := d.ctx.Done()
	h := pr.h
	locs, err := d.selPageIndex(fi, pr, sel, want) // with a selection, the OffsetIndex's pages
	if err != nil {
		return d.errorf(fi, -1, err)
	}
	k := 0 // next entry of locs
	d.idxSet = false
	for dst.Len < want {
		if err := d.canceled(done); err != nil {
			return err
		}
		if locs != nil {
			next, skip, err := d.skipByIndex(f, locs, &k, pr, sel, &si, lo, row)
			if err != nil {
				return d.errorf(fi, pr.off, err)
			}
			if skip {
				row = next
				continue
			}
		}
		off, body, ok, err := pr.next()
		if err != nil {
			return d.errorf(fi, off, err)
		}
		if !ok {
			break
		}
		if d.idxSet {
			// The page the index listed here: its header must agree
			// with the index, whose rows the walk trusts to skip.
			d.idxSet = false
			if off == d.idxAt.off {
				hn := int(pr.off-off) - int(h.compressed)
				if err := checkIndexedPage(f, h, hn, off, d.idxAt.end-d.idxAt.off, d.idxRows); err != nil {
					return d.errorf(fi, off, err)
				}
			}
		}
		data, err := d.pageKind(f, c, h, body)
		if err != nil {
			return d.errorf(fi, off, err)
		}
		if !data {
			continue
		}
		// Rows in the page, when the header tells.
		nrows := pageRows(f, h)
		if gr := d.unit.GroupRowCount; gr > 0 && nrows > gr-row {
			// The page's count is the writer's word, and its levels
			// (an RLE run) may claim millions of rows in a few bytes:
			// refused before anything is sized by it.
			return d.errorf(fi, off, corruptf("data page of %d rows starting at row %d runs past its row group's %d rows", nrows, row, gr))
		}
		if nrows >= 0 && d.skipPage(sel, &si, lo, row, nrows) {
			row += nrows
			continue
		}
		if row >= hi {
			break
		}
		if err := checkCRC(h, body); err != nil {
			return d.errorf(fi, off, err)
		}
		if err := d.holdPage(c, h, body); err != nil {
			return d.errorf(fi, off, err)
		}
		d.stats.Pages++
		var n int
		if n, si, err = d.appendDataPage(f, c, h, body, dst, sel, si, lo, hi, row, nrows); err != nil {
			return d.errorf(fi, off, err)
		}
		row += int64(n)
	}
	if dst.Len != want {
		return d.errorf(fi, -1, corruptf("column chunk holds %d of the %d rows wanted", dst.Len, want))
	}
	// The pages after the last selected row are not read either.
	d.countUnread(locs[k:], pr.off)
	return nil
}

// reserveColumn sets d.want and d.wantMax for the chunk's column and
// reserves room in dst for its rows, returning how many rows dst is to
// hold: the unit's, or the selected ones.
func (d *Decoder) reserveColumn(f *Field, c *Chunk, sel []int32, dst *column.Column) int {
	want := int(d.unit.Rows)
	if sel != nil {
		want = len(sel)
	}
	d.want, d.wantMax = want, int(min(c.Values, math.MaxInt32))*f.DType.Size()
	d.wantStored = storedBound(c)
	if sel != nil {
		d.reserveSel(f, c, dst, len(sel))
		d.want = 0
	} else {
		d.reserveWhole(f, c, dst)
	}
	return want
}

// selPageIndex returns the chunk's pages from its OffsetIndex when a
// selection is read from a file, so that pages holding no selected row
// can go unread; otherwise, or when the chunk has no index, nil.
func (d *Decoder) selPageIndex(fi int, pr *pageReader, sel []int32, want int) ([]pageLoc, error) {
	if sel != nil && want > 0 && pr.f != nil {
		return d.fieldPageIndex(fi)
	}
	return nil, nil
}

// canceled returns the unit's context's error once done (its Done
// channel, nil for a context that cannot be canceled) is closed, and nil
// until then. It is checked between pages.
func (d *Decoder) canceled(done <-chan struct{}) error {
	if done != nil {
		select {
		case <-done:
			return d.ctx.Err()
		default:
		}
	}
	return nil
}

// pageKind checks a page's sizes against its chunk's and reads it when it
// is the dictionary page. It reports whether the page is a data page, the
// only kind that holds rows.
func (d *Decoder) pageKind(f *Field, c *Chunk, h *pageHeader, body []byte) (bool, error) {
	if h.uncompressed > maxPageBytes || (c.Uncompressed > 0 && int64(h.uncompressed) > c.Uncompressed) ||
		(c.Values > 0 && int64(h.numValues) > c.Values) {
		return false, corruptf("page of %d bytes and %d values exceeds its column chunk's %d and %d",
			h.uncompressed, h.numValues, c.Uncompressed, c.Values)
	}
	if err := checkPageSize(c, h, body); err != nil {
		return false, err
	}
	switch h.typ {
	case pageDictionary:
		if err := checkCRC(h, body); err != nil {
			return false, err
		}
		if err := d.holdPage(c, h, body); err != nil {
			return false, err
		}
		if err := d.readDict(f, c, h, body); err != nil {
			return false, err
		}
		return false, nil
	case pageData, pageDataV2:
		return true, nil
	default:
		return false, nil // index pages and unknown page types carry no rows
	}
}

// pageRows returns the number of rows in a data page when its header
// tells (v2 pages, and v1 pages of non-repeated columns, whose values are
// rows), or -1.
func pageRows(f *Field, h *pageHeader) int64 {
	nrows := int64(-1)
	if h.typ == pageDataV2 {
		nrows = int64(h.numRows)
	} else if f.MaxRep == 0 {
		nrows = int64(h.numValues)
	}
	return nrows
}

// skipPage reports whether the data page of nrows rows starting at row can
// be passed over undecoded: it ends before the unit's first row lo, or
// (with a selection) holds no selected row. It moves *si past the selected
// rows before the page.
func (d *Decoder) skipPage(sel []int32, si *int, lo, row, nrows int64) bool {
	if row+nrows <= lo {
		return true
	}
	if sel != nil {
		for *si < len(sel) && lo+int64(sel[*si]) < row {
			*si++
		}
		if *si == len(sel) || lo+int64(sel[*si]) >= row+nrows {
			d.stats.PagesSkipped++
			return true
		}
	}
	return false
}

// appendDataPage decodes a data page starting at row and appends its
// wanted rows to dst: rows [lo, hi) of the row group, or with a selection
// those of sel from entry si on. It returns the page's rows and the next
// entry of sel.
//
// A page wanted whole from its first row is decoded straight into dst,
// rows past hi then cut off; any other is decoded into d.scratch and its
// wanted rows copied.
func (d *Decoder) appendDataPage(f *Field, c *Chunk, h *pageHeader, body []byte, dst *column.Column,
	sel []int32, si int, lo, hi, row, nrows int64) (int, int, error) {
	direct := sel == nil && row >= lo
	if sel != nil && nrows >= 0 && row >= lo && row+nrows <= hi {
		// A page whose rows are all selected goes straight in.
		first := int64(sel[si]) + lo
		if first == row && si+int(nrows) <= len(sel) && lo+int64(sel[si+int(nrows)-1]) == row+nrows-1 {
			direct = true
		}
	}
	if direct {
		n, err := d.appendPage(f, c, h, body, dst)
		if err != nil {
			return 0, si, err
		}
		if sel != nil {
			si += n
		}
		if over := row + int64(n) - hi; over > 0 {
			truncateColumn(dst, dst.Len-int(over))
		}
		return n, si, nil
	}
	s := d.resetScratch(f)
	n, err := d.appendPage(f, c, h, body, s)
	if err != nil {
		return 0, si, err
	}
	if sel == nil {
		a := max(lo-row, 0)
		b := min(hi-row, int64(n))
		if a < b {
			appendRows(dst, s, int(a), int(b))
		}
		return n, si, nil
	}
	rows := d.rows[:0]
	for si < len(sel) {
		r := lo + int64(sel[si]) - row
		if r < 0 {
			si++
			continue
		}
		if r >= int64(n) {
			break
		}
		rows = append(rows, int32(r))
		si++
	}
	d.rows = rows
	appendSelected(dst, s, rows)
	return n, si, nil
}

// resetScratch empties d.scratch to receive a page of field f, taking back
// its own buffer when it viewed the last page's values, and returns it.
func (d *Decoder) resetScratch(f *Field) *column.Column {
	s := &d.scratch
	s.Kind, s.DType, s.Width, s.Len = f.Kind, f.DType, 1, 0
	if d.scratchView {
		s.Data, d.scratchOwn, d.scratchView = d.scratchOwn, nil, false
	}
	s.Data = s.Data[:0]
	if f.Kind != column.Fixed {
		s.Offsets = append(s.Offsets[:0], 0)
	}
	if f.Nullable {
		s.Valid = s.Valid[:0]
	} else {
		s.Valid = nil
	}
	return s
}

// countUnread counts the pages of locs at or after off, those no selected
// row needed, as skipped and unread.
func (d *Decoder) countUnread(locs []pageLoc, off int64) {
	for _, l := range locs {
		if l.off >= off {
			d.stats.PagesSkipped++
			d.stats.PagesUnread++
			d.stats.BytesUnread += l.end - l.off
		}
	}
}

// reserveWhole sizes dst's values once, before the first page, when the
// unit is its row group whole and dst cannot hold the chunk's values.
// The chunk's level count times the value size is then the values'
// size, exactly for a column without nulls (a bound with them), so a
// unit's column is allocated once and never copied to grow. A thirty-
// second more lets a buffer that later units reuse (pool.Run circulates
// them) take one a little larger without reallocating. Grown page by page
// instead, a reused buffer ended up to a quarter larger than any unit it
// held, and was regrown, its old self left as garbage, whenever a larger
// unit came (docs/benchmarks.md, "Memory").
//
// The level count is the unit's word (a peer decodes units that other
// hosts planned), so a chunk whose values would take more than
// maxExpansion times its stored bytes is not reserved for: it grows from
// its pages, sized by what they hold (growData), as before. Real chunks
// that expand that much (long runs of one dictionary index, pages of
// zeros) lose only the reservation.
func (d *Decoder) reserveWhole(f *Field, c *Chunk, dst *column.Column) {
	if f.Kind == column.Bytes || dst == &d.scratch || !d.whole || d.wantMax <= 0 || cap(dst.Data) >= d.wantMax {
		return
	}
	n := int64(d.wantMax) + int64(d.wantMax)/32
	if n > storedBound(c) {
		return
	}
	if d.alloc != nil {
		if b := d.alloc(int(n)); b != nil {
			dst.Data = b[:0]
			return
		}
	}
	dst.Data = make([]byte, 0, n)
}

// maxExpansion bounds reserveWhole's trust in a chunk's level count: it
// reserves for at most this many times the chunk's stored bytes.
const maxExpansion = 8

// storedBound is the most bytes a buffer is sized for from a chunk's
// declared counts before its pages show them: maxExpansion times the
// unit's stored bytes of the chunk, and 64 KiB more.
func storedBound(c *Chunk) int64 {
	return maxExpansion*(c.End-c.Offset+c.DictLen) + 1<<16
}

// reserveSel makes room in dst for k selected rows, so that a selection
// grows dst's buffers once (to about their final size) rather than by
// doubling, which copies and first-touches twice the memory. List values
// are estimated from the chunk's size per row of the unit.
func (d *Decoder) reserveSel(f *Field, c *Chunk, dst *column.Column, k int) {
	switch f.Kind {
	case column.Fixed:
		dst.Data = reserve(dst.Data, k*f.DType.Size())
	case column.List:
		if d.unit.Rows > 0 && c.Uncompressed > 0 {
			// total_uncompressed_size is the writer's word: held, as in
			// reserveWhole, to maxExpansion times the stored bytes.
			est := c.Uncompressed / d.unit.Rows * int64(k)
			dst.Data = reserve(dst.Data, int(min(est, c.Uncompressed, storedBound(c))))
		}
		fallthrough
	default:
		if cap(dst.Offsets) < k+1 {
			no := make([]int64, len(dst.Offsets), k+1)
			copy(no, dst.Offsets)
			dst.Offsets = no
		}
	}
	if f.Nullable {
		dst.Valid = reserve(dst.Valid, k)
	}
}

// appendRows appends rows [a, b) of src to dst (same field).
func appendRows(dst, src *column.Column, a, b int) {
	size := src.DType.Size()
	if src.Kind == column.Fixed {
		dst.Data = append(dst.Data, src.Data[a*size:b*size]...)
	} else {
		base := dst.Offsets[dst.Len] - src.Offsets[a]
		dst.Data = append(dst.Data, src.Data[int(src.Offsets[a])*size:int(src.Offsets[b])*size]...)
		for _, o := range src.Offsets[a+1 : b+1] {
			dst.Offsets = append(dst.Offsets, o+base)
		}
	}
	if src.Valid != nil {
		dst.Valid = append(dst.Valid, src.Valid[a:b]...)
	}
	dst.Len += b - a
}

// appendSelected appends the rows of src listed in rows (increasing) to
// dst (same field): appendRows for each, without its per-row appends.
func appendSelected(dst, src *column.Column, rows []int32) {
	if len(rows) == 0 {
		return
	}
	size := src.DType.Size()
	if src.Kind == column.Fixed {
		start := len(dst.Data)
		dst.Data = extend(dst.Data, len(rows)*size)
		gatherElems(dst.Data[start:], src.Data, size, rows)
	} else {
		total := int64(0)
		for _, r := range rows {
			total += src.Offsets[r+1] - src.Offsets[r]
		}
		start := len(dst.Data)
		dst.Data = extend(dst.Data, int(total)*size)
		out := dst.Data[start:]
		o := dst.Offsets[dst.Len]
		k := 0
		for _, r := range rows {
			a, b := int(src.Offsets[r])*size, int(src.Offsets[r+1])*size
			k += copy(out[k:], src.Data[a:b])
			o += src.Offsets[r+1] - src.Offsets[r]
			dst.Offsets = append(dst.Offsets, o)
		}
	}
	if src.Valid != nil {
		v := len(dst.Valid)
		dst.Valid = extend(dst.Valid, len(rows))
		gather(dst.Valid[v:], src.Valid, rows)
	}
	dst.Len += len(rows)
}

// truncateColumn keeps the first n rows of col.
func truncateColumn(col *column.Column, n int) {
	size := col.DType.Size()
	if col.Kind == column.Fixed {
		col.Data = col.Data[:n*size]
	} else {
		col.Offsets = col.Offsets[:n+1]
		col.Data = col.Data[:int(col.Offsets[n])*size]
	}
	if col.Valid != nil {
		col.Valid = col.Valid[:n]
	}
	col.Len = n
}
