package decode

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/format"
)

// appendPage decodes one data page and appends its rows to col, returning
// the number of rows it started (a v1 page of a list column may continue
// col's last row). Values go straight to their final place in col.Data
// where the format allows: PLAIN fixed-width values of a compressed v2
// page are decompressed into it.
func (d *Decoder) appendPage(f *Field, c *Chunk, h *pageHeader, body []byte, col *column.Column) (int, error) {
	n := int(h.numValues)
	var repB, defB, vals []byte
	valsLen, pvLead := 0, -1
	compressed := false
	if h.typ == pageDataV2 {
		rl, dl := int(h.repLen), int(h.defLen)
		repB, defB, vals = body[:rl], body[rl:rl+dl], body[rl+dl:]
		valsLen = int(h.uncompressed) - rl - dl
		if valsLen < 0 {
			return 0, corruptf("v2 page: levels of %d bytes exceed the page's %d", rl+dl, h.uncompressed)
		}
		compressed = h.isCompressed && c.Codec != codecNone
		if !compressed && len(vals) != valsLen {
			return 0, corruptf("v2 page: %d value bytes, header says %d", len(vals), valsLen)
		}
	} else if lead, rb, db, ok := d.v1Direct(f, c, h, body); ok {
		repB, defB, vals, valsLen, compressed = rb, db, body, int(h.uncompressed)-lead, true
		pvLead = lead
	} else {
		var err error
		if repB, defB, vals, err = d.v1Page(f, c, h, body, col); err != nil {
			return 0, err
		}
		valsLen = len(vals)
	}
	// Lists of required elements (the common case) need only the row
	// starts, not every repetition level.
	startsOnly := f.MaxRep == 1 && f.MaxDef == f.RowDef+1
	if startsOnly {
		var err error
		if d.starts, err = rowStartsRLE(d.starts[:0], repB, n); err != nil {
			return 0, corruptf("repetition levels: %v", err)
		}
	} else if f.MaxRep > 0 {
		d.rep = growU8(d.rep, n)
		if _, err := decodeLevels(d.rep, repB, f.repWidth()); err != nil {
			return 0, corruptf("repetition levels: %v", err)
		}
	}
	if f.MaxDef > 0 {
		d.def = growU8(d.def, n)
		if _, err := decodeLevels(d.def, defB, f.defWidth()); err != nil {
			return 0, corruptf("definition levels: %v", err)
		}
	}
	pv := pageValues{d: d, f: f, c: c, h: h, vals: vals, valsLen: valsLen, compressed: compressed, lead: pvLead}
	if startsOnly {
		return d.appendListStarts(f, n, &pv, col)
	}
	if f.MaxRep > 0 {
		return d.appendListPage(f, n, &pv, col)
	}
	return d.appendFlatPage(f, n, &pv, col)
}

// v1Page decompresses a v1 data page that v1Direct cannot place and
// splits it into its repetition levels, definition levels and values.
func (d *Decoder) v1Page(f *Field, c *Chunk, h *pageHeader, body []byte, col *column.Column) (repB, defB, vals []byte, err error) {
	n := int(h.numValues)
	page := body
	if c.Codec != codecNone && h.encoding == encPlain && f.Kind != column.Bytes && f.DType != column.Bool && !f.converts() {
		// Decompress the page where its values go; once the levels
		// are read, the values move down over them (in cache) rather
		// than being copied from a scratch buffer.
		start := len(col.Data)
		col.Data = reserve(col.Data, max(int(h.uncompressed), n*f.DType.Size()))
		page = col.Data[start : start+int(h.uncompressed)]
		if err := d.z.decompress(c.Codec, page, body); err != nil {
			return nil, nil, nil, corrupt(err)
		}
	} else if c.Codec != codecNone {
		d.page = growBytes(d.page, int(h.uncompressed))
		if err := d.z.decompress(c.Codec, d.page, body); err != nil {
			return nil, nil, nil, corrupt(err)
		}
		page = d.page
	} else if len(body) != int(h.uncompressed) {
		return nil, nil, nil, corruptf("uncompressed page of %d bytes, header says %d", len(body), h.uncompressed)
	}
	if f.MaxRep > 0 {
		if repB, page, err = v1Levels(page, h.repEncoding); err != nil {
			return nil, nil, nil, err
		}
	}
	if f.MaxDef > 0 {
		if defB, page, err = v1Levels(page, h.defEncoding); err != nil {
			return nil, nil, nil, err
		}
	}
	return repB, defB, page, nil
}

// v1Levels splits a v1 page's length-prefixed RLE levels from the rest.
func v1Levels(page []byte, enc int32) (levels, rest []byte, err error) {
	if enc != encRLE {
		return nil, nil, fmt.Errorf("%w: level encoding %d (only RLE)", ErrUnsupported, enc)
	}
	if len(page) < 4 {
		return nil, nil, corruptf("v1 page too short for its levels")
	}
	n := binary.LittleEndian.Uint32(page)
	if uint64(n) > uint64(len(page)-4) {
		return nil, nil, corruptf("v1 levels of %d bytes in a page of %d", n, len(page))
	}
	return page[4 : 4+n], page[4+n:], nil
}

// appendFlatPage appends the n rows of a page of a non-repeated column.
func (d *Decoder) appendFlatPage(f *Field, n int, pv *pageValues, col *column.Column) (int, error) {
	nonNull := n
	var def []uint8
	if f.MaxDef > 0 {
		def = d.def[:n]
		nonNull = 0
		for _, l := range def {
			if l == uint8(f.MaxDef) {
				nonNull++
			} else if l > uint8(f.MaxDef) {
				return 0, corruptf("definition level %d above the maximum %d", l, f.MaxDef)
			}
		}
	}
	if f.Kind == column.Bytes {
		if err := pv.appendBytes(col, def, uint8(f.MaxDef), n, nonNull); err != nil {
			return 0, err
		}
	} else if viewed, err := d.viewValues(col, pv, n); err != nil || viewed {
		if err != nil {
			return 0, err
		}
	} else {
		size := f.DType.Size()
		if w := plainSize(pv.c); pv.h.encoding == encPlain && w > 0 && int64(pv.valsLen) < int64(nonNull)*int64(w) {
			// Before the column is sized for the page's count.
			return 0, corruptf("PLAIN page of %d values of %d bytes holds %d value bytes", nonNull, w, pv.valsLen)
		}
		start := len(col.Data)
		col.Data = d.growData(col, n*size, col.Len+n)
		region := col.Data[start:]
		if err := pv.fixedAt(col.Data, start, nonNull); err != nil {
			return 0, err
		}
		if nonNull < n {
			spread(region, size, def, uint8(f.MaxDef), 0, nonNull)
		}
	}
	if f.Nullable {
		v := len(col.Valid)
		col.Valid = extend(col.Valid, n)
		valid := col.Valid[v:]
		if nonNull == n {
			fill(valid, 1)
		} else {
			for i, l := range def {
				valid[i] = b2u8(l == uint8(f.MaxDef))
			}
		}
	}
	col.Len += n
	return n, nil
}

// plainSize is the bytes of one PLAIN value of chunk c as stored, or 0
// where it varies (byte arrays) or is a bit (booleans).
func plainSize(c *Chunk) int {
	switch format.Type(c.Physical) {
	case format.Int32, format.Float:
		return 4
	case format.Int64, format.Double:
		return 8
	case format.Int96:
		return int96Size
	case format.FixedLenByteArray:
		return int(max(c.TypeLen, 0))
	}
	return 0
}

func b2u8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// appendListPage appends the rows of a page of a list column: offsets and
// validity from the levels, then the element values.
func (d *Decoder) appendListPage(f *Field, n int, pv *pageValues, col *column.Column) (int, error) {
	rep := d.rep[:n]
	var def []uint8
	if f.MaxDef > 0 {
		def = d.def[:n]
	}
	if n > 0 && rep[0] != 0 && col.Len == 0 {
		return 0, corruptf("page starts inside a row that no earlier page began")
	}
	// offs[L] is the running end of the last row; a new row writes the end
	// of the previous one at its start.
	L := col.Len
	offs := growOffsets(col, L+n+1)
	cur := offs[L]
	base := cur
	maxDef, rowDef := uint8(f.MaxDef), uint8(f.RowDef)
	nonNull := 0
	var valid []uint8
	if f.Nullable {
		col.Valid = extend(col.Valid, n)[:L]
		valid = col.Valid[:L+n]
	}
	var err error
	switch {
	case def == nil || allEqual(def, maxDef):
		// Every level is a value: rows start where rep is 0.
		L = rowStarts(rep, offs, L, cur)
		cur += int64(n)
		nonNull = n
		if valid != nil {
			fill(valid[col.Len:L], 1)
		}
	case maxDef == rowDef+1:
		L, cur, err = listLevelsRequired(rep, def, offs, valid, L, cur, maxDef, rowDef)
		nonNull = int(cur - base)
	default:
		L, cur, nonNull, err = listLevels(rep, def, offs, valid, L, cur, maxDef, rowDef)
	}
	if err != nil {
		return 0, err
	}
	offs[L] = cur
	rows := L - col.Len
	col.Offsets = offs[:L+1]
	if valid != nil {
		col.Valid = valid[:L]
	}
	col.Len = L
	slots := int(cur - base)
	size := f.DType.Size()
	start := len(col.Data)
	col.Data = d.growData(col, slots*size, col.Len)
	region := col.Data[start:]
	if err := pv.fixedAt(col.Data, start, nonNull); err != nil {
		return 0, err
	}
	if nonNull < slots {
		spread(region, size, def, maxDef, rowDef+1, nonNull)
	}
	return rows, nil
}

// growOffsets makes room for need offsets in col.Offsets, at least
// doubling its capacity when it must grow, and returns them.
func growOffsets(col *column.Column, need int) []int64 {
	if cap(col.Offsets) < need {
		no := make([]int64, len(col.Offsets), max(need, 2*cap(col.Offsets)))
		copy(no, col.Offsets)
		col.Offsets = no
	}
	return col.Offsets[:need]
}

// listLevelsRequired is appendListPage's walk of the levels rep and def
// of a list whose elements cannot be null: from row L, whose values end
// at cur, it records each row's start in offs (and its validity in valid,
// when not nil) and returns the new row count and running end.
func listLevelsRequired(rep, def []uint8, offs []int64, valid []uint8, L int, cur int64, maxDef, rowDef uint8) (int, int64, error) {
	n := len(rep)
	// No null elements: a level is a value iff it is maxDef. Skip
	// eight levels at a time while they neither start a row nor
	// lack a value.
	const ones = 0x0101010101010101
	full := uint64(maxDef) * ones
	i := 0
	for ; i < n; i++ {
		if i&7 == 0 && i+8 <= n {
			if binary.LittleEndian.Uint64(rep[i:]) == ones && binary.LittleEndian.Uint64(def[i:]) == full {
				cur += 8
				i += 7
				continue
			}
		}
		l := def[i]
		if l > maxDef {
			return 0, 0, corruptf("definition level %d above the maximum %d", l, maxDef)
		}
		if rep[i] == 0 {
			offs[L] = cur
			if valid != nil {
				valid[L] = b2u8(l >= rowDef)
			}
			L++
		}
		cur += int64(b2u8(l == maxDef))
	}
	return L, cur, nil
}

// listLevels is appendListPage's walk of the levels of a list whose
// elements may be null, as listLevelsRequired; it also returns how many
// of the element slots hold values.
func listLevels(rep, def []uint8, offs []int64, valid []uint8, L int, cur int64, maxDef, rowDef uint8) (int, int64, int, error) {
	nonNull := 0
	for i, r := range rep {
		l := def[i]
		if l > maxDef {
			return 0, 0, 0, corruptf("definition level %d above the maximum %d", l, maxDef)
		}
		if r == 0 {
			offs[L] = cur
			if valid != nil {
				valid[L] = b2u8(l >= rowDef)
			}
			L++
		}
		if l > rowDef {
			cur++
			if l == maxDef {
				nonNull++
			}
		}
	}
	return L, cur, nonNull, nil
}

func allEqual(b []uint8, v uint8) bool {
	w := uint64(v) * 0x0101010101010101
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if binary.LittleEndian.Uint64(b[i:]) != w {
			return false
		}
	}
	for _, x := range b[i:] {
		if x != v {
			return false
		}
	}
	return true
}

// rowStarts records a row start at every zero repetition level: offs[L]
// gets the value count before it. It returns the new row count. It skips
// eight levels at a time while none is zero, the common case of long
// lists.
func rowStarts(rep []uint8, offs []int64, L int, base int64) int {
	i := 0
	for ; i+8 <= len(rep); i += 8 {
		w := binary.LittleEndian.Uint64(rep[i:])
		// A byte of w is zero iff its bit in the mask is set (levels are 0 or 1).
		if w == 0x0101010101010101 {
			continue
		}
		for j := range 8 {
			if rep[i+j] == 0 {
				offs[L] = base + int64(i+j)
				L++
			}
		}
	}
	for ; i < len(rep); i++ {
		if rep[i] == 0 {
			offs[L] = base + int64(i)
			L++
		}
	}
	return L
}

// appendListStarts appends the rows of a page of a list whose elements
// are required, from the row starts (d.starts) and the definition levels.
// With required elements a row is either one level below maxDef (a null
// or empty list) or levels that are all values, so a row's length is the
// distance to the next start.
func (d *Decoder) appendListStarts(f *Field, n int, pv *pageValues, col *column.Column) (int, error) {
	starts := d.starts
	def := d.def[:n]
	first := n
	if len(starts) > 0 {
		first = int(starts[0])
	}
	if first > 0 && col.Len == 0 {
		return 0, corruptf("page starts inside a row that no earlier page began")
	}
	L := col.Len
	need := L + len(starts) + 1
	if cap(col.Offsets) < need {
		no := make([]int64, len(col.Offsets), max(need, 2*cap(col.Offsets)))
		copy(no, col.Offsets)
		col.Offsets = no
	}
	offs := col.Offsets[:need]
	base := offs[L]
	cur := base + int64(first) // levels continuing the previous row
	maxDef, rowDef := uint8(f.MaxDef), uint8(f.RowDef)
	var valid []uint8
	if f.Nullable {
		col.Valid = extend(col.Valid, len(starts))
		valid = col.Valid[L:]
	}
	for k, p := range starts {
		q := n
		if k+1 < len(starts) {
			q = int(starts[k+1])
		}
		offs[L] = cur
		L++
		l := def[p]
		if l == maxDef {
			cur += int64(q - int(p))
		} else if q != int(p)+1 || l > maxDef {
			return 0, corruptf("list row at level %d: definition level %d", p, l)
		}
		if valid != nil {
			valid[k] = b2u8(l >= rowDef)
		}
	}
	offs[L] = cur
	col.Offsets = offs[:L+1]
	rows := L - col.Len
	col.Len = L
	nonNull := int(cur - base)
	size := f.DType.Size()
	start := len(col.Data)
	if ok, err := d.viewValues(col, pv, nonNull); ok || err != nil {
		return rows, err
	}
	col.Data = d.growData(col, nonNull*size, col.Len)
	if err := pv.fixedAt(col.Data, start, nonNull); err != nil {
		return 0, err
	}
	return rows, nil
}

// viewValues lets the scratch column, when it receives a page decoded for
// some of its rows only, read the page's n PLAIN fixed-width values where
// they already lie (in the page as read, or where a v1 page decompressed
// whole) instead of having them copied in. It reports whether it did; the
// view is capped so that nothing appends into it, and decodePages gives
// the scratch its own buffer back before the next page.
func (d *Decoder) viewValues(col *column.Column, pv *pageValues, n int) (bool, error) {
	need := n * pv.f.DType.Size()
	if col != &d.scratch || pv.f.Kind == column.Bytes || len(col.Data) != 0 || d.scratchView || pv.h.encoding != encPlain ||
		pv.f.DType == column.Bool || pv.f.converts() || pv.valsLen != need {
		return false, nil
	}
	var vals []byte
	switch {
	case !pv.compressed && len(pv.vals) >= need:
		vals = pv.vals
	case pv.compressed && pv.lead > 0:
		v, err := pv.plain()
		if err != nil {
			return false, err
		}
		vals = v
	default:
		return false, nil
	}
	d.scratchOwn, d.scratchView, col.Data = col.Data, true, vals[:need:need]
	return true, nil
}

// rowStartsRLE decodes n repetition levels of bit width 1 and appends to
// starts the positions of the zeros: the levels that begin a row. Its
// cost follows the number of rows rather than of levels.
func rowStartsRLE(starts []int32, src []byte, n int) ([]int32, error) {
	pos, out := 0, 0
	for out < n {
		h, p, err := hybridHeader(src, pos)
		if err != nil {
			return nil, err
		}
		pos = p
		if h&1 == 0 {
			c := int(min(h>>1, uint64(n-out)))
			if c == 0 || pos >= len(src) {
				return nil, errHybrid
			}
			v := src[pos]
			pos++
			switch v {
			case 0:
				for i := range c {
					starts = append(starts, int32(out+i))
				}
			case 1:
			default:
				return nil, fmt.Errorf("%w: repetition level %d", errHybrid, v)
			}
			out += c
			continue
		}
		groups := h >> 1
		if groups == 0 || groups > uint64(len(src)-pos) {
			return nil, fmt.Errorf("%w: bit-packed run of %d groups", errHybrid, groups)
		}
		run := src[pos : pos+int(groups)]
		pos += int(groups)
		nvals := min(int(groups)*8, n-out)
		for i := 0; i < nvals; i += 64 {
			var w uint64
			if b := i >> 3; b+8 <= len(run) {
				w = binary.LittleEndian.Uint64(run[b:])
			} else {
				w = loadTail(run[b:])
			}
			z := ^w
			if m := nvals - i; m < 64 {
				z &= 1<<uint(m) - 1
			}
			for z != 0 {
				starts = append(starts, int32(out+i+bits.TrailingZeros64(z)))
				z &= z - 1
			}
		}
		out += nvals
	}
	return starts, nil
}

// v1Direct decides whether a v1 page's PLAIN fixed-width values can be
// decompressed straight into the column: always when the column has no
// levels (the page is all values), and for snappy pages whose level
// sections snappyPrefix can decode first. It returns the levels and the
// length of the levels part.
func (d *Decoder) v1Direct(f *Field, c *Chunk, h *pageHeader, body []byte) (int, []byte, []byte, bool) {
	if c.Codec == codecNone || h.encoding != encPlain || f.Kind == column.Bytes || f.DType == column.Bool || f.converts() {
		return 0, nil, nil, false
	}
	if f.MaxRep == 0 && f.MaxDef == 0 {
		return 0, nil, nil, true
	}
	if c.Codec != codecSnappy {
		return 0, nil, nil, false
	}
	return d.v1SnappyLevels(f, h, body)
}
