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
	want := int(d.unit.Rows)
	if sel != nil {
		want = len(sel)
	}
	si := 0 // next entry of sel to place
	d.want, d.wantMax = want, int(min(c.Values, math.MaxInt32))*f.DType.Size()
	if sel != nil {
		d.reserveSel(f, c, dst, len(sel))
		d.want = 0
	} else {
		d.reserveWhole(f, c, dst)
	}
	row := c.FirstRow
	done := d.ctx.Done()
	h := pr.h
	var locs []pageLoc // with a selection, the OffsetIndex's pages
	k := 0             // next entry of locs
	if sel != nil && want > 0 && pr.f != nil {
		var err error
		if locs, err = d.pageIndex(c); err != nil {
			return d.errorf(fi, -1, err)
		}
	}
	for dst.Len < want {
		if done != nil {
			select {
			case <-done:
				return d.ctx.Err()
			default:
			}
		}
		if locs != nil {
			next, skip, err := d.skipByIndex(locs, &k, pr, sel, &si, lo, row)
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
		if h.uncompressed > maxPageBytes || (c.Uncompressed > 0 && int64(h.uncompressed) > c.Uncompressed) ||
			(c.Values > 0 && int64(h.numValues) > c.Values) {
			return d.errorf(fi, off, corruptf("page of %d bytes and %d values exceeds its column chunk's %d and %d",
				h.uncompressed, h.numValues, c.Uncompressed, c.Values))
		}
		switch h.typ {
		case pageDictionary:
			if err := checkCRC(h, body); err != nil {
				return d.errorf(fi, off, err)
			}
			if err := d.readDict(f, c, h, body); err != nil {
				return d.errorf(fi, off, err)
			}
			continue
		case pageData, pageDataV2:
		default:
			continue // index pages and unknown page types carry no rows
		}
		// Rows in the page, when the header tells.
		nrows := int64(-1)
		if h.typ == pageDataV2 {
			nrows = int64(h.numRows)
		} else if f.MaxRep == 0 {
			nrows = int64(h.numValues)
		}
		if nrows >= 0 {
			if row+nrows <= lo {
				row += nrows
				continue
			}
			if sel != nil {
				for si < len(sel) && lo+int64(sel[si]) < row {
					si++
				}
				if si == len(sel) || lo+int64(sel[si]) >= row+nrows {
					row += nrows
					d.stats.PagesSkipped++
					continue
				}
			}
		}
		if row >= hi {
			break
		}
		if err := checkCRC(h, body); err != nil {
			return d.errorf(fi, off, err)
		}
		d.stats.Pages++
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
				return d.errorf(fi, off, err)
			}
			if sel != nil {
				si += n
			}
			row += int64(n)
			if over := row - hi; over > 0 {
				truncateColumn(dst, dst.Len-int(over))
			}
			continue
		}
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
		n, err := d.appendPage(f, c, h, body, s)
		if err != nil {
			return d.errorf(fi, off, err)
		}
		if sel == nil {
			a := max(lo-row, 0)
			b := min(hi-row, int64(n))
			if a < b {
				appendRows(dst, s, int(a), int(b))
			}
		} else {
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
		}
		row += int64(n)
	}
	if dst.Len != want {
		return d.errorf(fi, -1, corruptf("column chunk holds %d of the %d rows wanted", dst.Len, want))
	}
	// The pages after the last selected row are not read either.
	for ; k < len(locs); k++ {
		if locs[k].off >= pr.off {
			d.stats.PagesSkipped++
			d.stats.PagesUnread++
			d.stats.BytesUnread += locs[k].end - locs[k].off
		}
	}
	return nil
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
	if n > maxExpansion*(c.End-c.Offset+c.DictLen)+1<<16 {
		return
	}
	dst.Data = make([]byte, 0, n)
}

// maxExpansion bounds reserveWhole's trust in a chunk's level count: it
// reserves for at most this many times the chunk's stored bytes.
const maxExpansion = 8

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
			est := c.Uncompressed / d.unit.Rows * int64(k)
			dst.Data = reserve(dst.Data, int(min(est, c.Uncompressed)))
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
