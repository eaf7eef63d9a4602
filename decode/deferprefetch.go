package decode

// Deferred prefetch: fetching a late column's wanted pages, not its chunk.
//
// From a remote file, Open prefetches the unit's chunks whole so that the
// reads of the decode that follows are served from memory. For a late
// column of a selective pipeline that fetches pages the OffsetIndex walk
// then never reads (pageindex.go): with a filter that drops rows in runs,
// most of them. A caller that knows which fields it will decode for a
// selection can defer them (DeferPrefetch): Open leaves their chunks out,
// and once the rows are known PrefetchSelected asks for the ranges the
// walk will read, no more: the dictionary, whatever precedes the first
// indexed page, and each run of pages holding a selected row. A chunk
// without a usable index is prefetched whole, as before.
//
// A deferred field's dictionary page and OffsetIndex are needed whatever
// its rows, so Open still prefetches them with the rest (unitRanges).
// PrefetchSelected reads the index itself, and an index lies near the
// footer, past the cached tail of a large file: without this it would
// wait a request for each field's index.
//
// Deferring costs latency: a deferred column's bytes are asked for only
// after the early columns are decoded and the rows selected, not while
// they decode. So it pays only where pages go unread, and the engine
// defers only once a job's late pages have been seen to go unread
// (engine/latefetch.go). The ranges are exactly the walk's windows, so a
// deferred column's reads are served from the prefetch as whole ones are
// (TestDeferredPrefetchCoversReads).

// DeferPrefetch names the fields (indexes into Fields) whose chunks Open
// does not prefetch from a remote file, for PrefetchSelected to fetch
// once the rows are known; nil defers none. It holds for later units
// until changed.
func (d *Decoder) DeferPrefetch(fields []int) {
	if len(fields) == 0 {
		d.deferred = d.deferred[:0]
		return
	}
	d.deferred = growBools(d.deferred, len(d.fields))
	for _, fi := range fields {
		if fi >= 0 && fi < len(d.fields) {
			d.deferred[fi] = true
		}
	}
}

// PrefetchSelected asks the open unit's remote file for the pages of the
// deferred fields that a decode for sel (DecodeColumn's selection; nil:
// every row) will read. It does nothing for a local file, and reads only
// the chunks' OffsetIndexes itself. It does not wait for the bytes.
func (d *Decoder) PrefetchSelected(sel []int32) error {
	p, ok := d.file.(Prefetcher)
	if !d.open || !ok || len(d.deferred) == 0 || (sel != nil && len(sel) == 0) {
		return nil
	}
	d.ranges = d.ranges[:0]
	for fi, def := range d.deferred {
		if !def {
			continue
		}
		var err error
		if d.ranges, err = d.selRanges(fi, sel, d.ranges); err != nil {
			return d.errorf(fi, -1, err)
		}
	}
	p.Prefetch(d.ranges)
	return nil
}

// selRanges appends to dst the byte ranges of chunk c that a walk for sel
// reads (decodePages with skipByIndex): the dictionary, the bytes before
// the first indexed page, each run of pages holding a selected row, and
// the first headerProbe bytes of each page skipped before a selected row
// (its header, checked against the index);
// the whole chunk when it has no usable index or sel is nil.
func (d *Decoder) selRanges(fi int, sel []int32, dst []Range) ([]Range, error) {
	c := &d.unit.Chunks[fi]
	if c.Absent {
		return dst, nil
	}
	if c.DictLen > 0 {
		dst = append(dst, Range{Off: c.DictOffset, Len: c.DictLen})
	}
	var locs []pageLoc
	if sel != nil {
		var err error
		if locs, err = d.fieldPageIndex(fi); err != nil {
			return dst, err
		}
	}
	if locs == nil {
		return append(dst, Range{Off: c.Offset, Len: c.End - c.Offset}), nil
	}
	if locs[0].off > c.Offset {
		dst = append(dst, Range{Off: c.Offset, Len: locs[0].off - c.Offset})
	}
	lo, si := d.unit.RowStart, 0
	for k := 0; k < len(locs); k++ {
		if !holdsSelected(sel, &si, lo, locs[k].first, pageEnd(locs, k)) {
			if si < len(sel) {
				// Skipped before a selected row: the walk reads its
				// header to check the index (skipByIndex).
				dst = append(dst, Range{Off: locs[k].off, Len: min(headerProbe, locs[k].end-locs[k].off)})
			}
			continue
		}
		end := runEnd(locs, k, sel, si, lo)
		dst = append(dst, Range{Off: locs[k].off, Len: end - locs[k].off})
		for k+1 < len(locs) && locs[k+1].off < end {
			k++
		}
	}
	return dst, nil
}

// growBools returns b resized to n, all false.
func growBools(b []bool, n int) []bool {
	if cap(b) < n {
		return make([]bool, n)
	}
	b = b[:n]
	clear(b)
	return b
}
