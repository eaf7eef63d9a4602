package decode

import (
	"errors"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/format"
)

// Ruling out pages by the ColumnIndex.
//
// The Parquet page index has two parts: the OffsetIndex says where each
// data page of a chunk lies and which row it starts with (pageindex.go
// skips by it), and the ColumnIndex gives each page's minimum, maximum,
// null count and whether it holds only nulls. A filter that no value
// within a page's bounds can pass rules out that page's rows without
// decompressing it; across the columns a filter reads, a row is ruled
// out when the pages of the columns that hold it are, together. The
// engine asks (it knows the filters); the decoder reads the two indexes
// of an open unit's column and gives each page's rows and bounds.
//
// Bounds are trusted as the row group statistics are (bounds.go): the
// same types, and from min_values and max_values, which the format
// defines as bounds even where a writer truncated them. An index that
// does not agree with itself (lists of different lengths, pages out of
// order) gives no bounds: every page is then read, as without an index.

// PageBounds is a data page of an open unit's column: the unit's rows
// [First, End) that it holds, the rows of the whole page, and the
// bounds of its values over them.
type PageBounds struct {
	First, End int64
	Rows       int64
	Bounds
}

// PageBounds returns field fi's pages that hold rows of the open unit,
// in order, with their bounds; nil when the column gives none (no
// ColumnIndex or OffsetIndex, a list, a converted type, or an index that
// cannot be trusted).
func (d *Decoder) PageBounds(fi int) ([]PageBounds, error) {
	if !d.open {
		return nil, errors.New("decode: PageBounds before a successful Open")
	}
	f, c := &d.fields[fi], &d.unit.Chunks[fi]
	if c.Absent || c.ColIndexLen <= 0 || c.IndexLen <= 0 || f.Kind == column.List || f.converts() {
		return nil, nil
	}
	var oi format.OffsetIndex
	var ci format.ColumnIndex
	for _, ix := range []struct {
		off int64
		n   int32
		v   any
	}{{c.Index, c.IndexLen, &oi}, {c.ColIndex, c.ColIndexLen, &ci}} {
		ok, err := d.readIndex(ix.off, ix.n, ix.v)
		if err != nil {
			return nil, d.errorf(fi, -1, err)
		}
		if !ok {
			return nil, nil
		}
	}
	n := len(oi.PageLocations)
	if n == 0 || len(ci.NullPages) != n || len(ci.MinValues) != n || len(ci.MaxValues) != n ||
		(len(ci.NullCounts) != 0 && len(ci.NullCounts) != n) {
		return nil, nil
	}
	lo, hi := d.unit.RowStart, d.unit.RowStart+d.unit.Rows
	groupRows := c.Values // not a list: one level a row
	var out []PageBounds
	for k, l := range oi.PageLocations {
		end := groupRows
		if k+1 < n {
			end = oi.PageLocations[k+1].FirstRowIndex
		}
		if l.FirstRowIndex < 0 || end <= l.FirstRowIndex || end > groupRows || (k == 0 && l.FirstRowIndex != 0) {
			return nil, nil
		}
		if end <= lo || l.FirstRowIndex >= hi {
			continue
		}
		p := PageBounds{First: max(l.FirstRowIndex, lo) - lo, End: min(end, hi) - lo, Rows: end - l.FirstRowIndex}
		p.Nulls = -1
		if !f.Nullable {
			p.Nulls = 0
		} else if len(ci.NullCounts) == n && ci.NullCounts[k] >= 0 && ci.NullCounts[k] <= p.Rows {
			p.Nulls = ci.NullCounts[k]
		}
		if ci.NullPages[k] {
			if f.Nullable {
				p.Nulls = p.Rows
			}
		} else {
			p.values(f, ci.MinValues[k], ci.MaxValues[k], nil, nil)
		}
		out = append(out, p)
	}
	return out, nil
}

// PrefetchPageIndex names the fields (indexes into Fields) whose
// OffsetIndex and ColumnIndex Open prefetches from a remote file with
// the unit's chunks, for PageBounds to read from memory: an index lies
// near the footer, past the cached tail of a large file, and would
// otherwise cost a request for each field of each unit. nil names none.
// It holds for later units until changed.
func (d *Decoder) PrefetchPageIndex(fields []int) {
	d.indexed = d.indexed[:0]
	if len(fields) == 0 {
		return
	}
	d.indexed = growBools(d.indexed, len(d.fields))
	for _, fi := range fields {
		if fi >= 0 && fi < len(d.fields) {
			d.indexed[fi] = true
		}
	}
}

// readIndex reads the n bytes at off and parses them into v; ok is false
// (and err nil) when they do not parse.
func (d *Decoder) readIndex(off int64, n int32, v any) (ok bool, err error) {
	d.idxRaw = growBytes(d.idxRaw, int(n))
	if err := readFull(withContext(d.ctx, d.file), d.idxRaw, off); err != nil {
		return false, err
	}
	return unmarshalThrift(d.idxRaw, v) == nil, nil
}
