package peer

import (
	"encoding/binary"
	"fmt"
	"slices"
	"unsafe"

	"github.com/lastmile/lastmile/column"
)

// The compact wire form
//
// A unit's output is mostly integers far smaller than their type, and
// fixed-width rows padded with zeros: ids hashed into a table
// (hash_mod), held as int64, and sequences padded to a fixed length.
// Sent as they are, those bytes cost both sides: the peer checksums,
// encrypts and writes every byte, and the requester reads, decrypts,
// copies and checksums it, about 2 s of CPU per GB on each side
// (docs/peers.md). A requester that asks for the compact form
// (Ticket.Wire = WireCompact) gets each column of a unit in one of these
// lossless forms, chosen per unit from its values:
//
//   - narrowed: an integer column (int16, int32 or int64; fixed or list)
//     whose values all fit a narrower signed type travels in that type,
//     and is sign-extended on arrival;
//   - trimmed: a fixed column of width W > 1 whose rows end (or begin)
//     with runs of zero elements travels as a list of each row's elements
//     without that run, and is padded back with zeros on arrival; it is
//     trimmed only when that drops at least an eighth of its elements,
//     and at the end or the start, whichever drops more;
//   - list and bytes offsets travel as int32: a record holds at most
//     maxRecordBytes, or one row alone, and gRPC refuses messages past
//     64 MiB (maxMessage), far below 2^31 elements.
//
// A zero element is one whose bytes are all zero, so a float -0.0 is
// kept: what arrives is byte for byte what the peer computed, and the
// checksum, still that of the unit's output as computed, proves it.
// Everything else travels as in the plain form (wire.go). The field's
// metadata keeps the column's own kind, dtype and width; its Arrow type
// says how it travels, and "lastmile.trim" whether it was trimmed.
//
// The encoding is a plain loop over each value (a min and max, then a
// narrowing copy) and a scan of each padded row's zero run. It costs the
// peer less than the bytes it saves, and the requester's sign-extending
// copy replaces the copy it made of the plain bytes.
//
// Rejected: general-purpose compression (LZ4, ZSTD), which costs a peer
// 4 to 10 s per GB (shared/SPILL-NOTES.md), more than it saves on any
// link but a slow one; and per-record choices, which would need a schema
// per record where Arrow IPC has one per stream.

// Wire forms a requester can read, as it asks for them in a ticket.
const (
	WirePlain   = 0 // every column's bytes as they are: protocol version 1's first form
	WireCompact = 1 // narrowed integers, trimmed zero runs, int32 offsets
)

// Trimming directions of a fixed column's rows.
const (
	trimNone = iota
	trimTail // each row's trailing zero elements dropped
	trimHead // each row's leading zero elements dropped
)

var trimNames = [...]string{trimTail: "tail", trimHead: "head"}

// colForm is how one column travels.
type colForm struct {
	elem column.DType // the values' dtype on the wire: the column's own, or a narrower integer
	trim int
}

// wireUnit is a unit's output in the form it travels in. Columns that
// travel as they are view the output batch; the others live in buf and
// offs, which the wireUnit keeps from unit to unit.
type wireUnit struct {
	src     *column.Batch
	batch   column.Batch // the wire columns: their Kind, DType and Width as sent
	forms   []colForm
	compact bool

	buf        []byte
	offs       []int64
	tail, head []int32 // a padded column's rows: elements kept trimming each way
}

// encode lays out b in the plain form, or the compact one. b must not
// change until the wireUnit is done with (sent).
func (w *wireUnit) encode(b *column.Batch, compact bool) {
	w.src, w.compact = b, compact
	w.batch.Rows = b.Rows
	w.batch.Columns = append(w.batch.Columns[:0], b.Columns...)
	w.forms = w.forms[:0]
	w.offs = w.offs[:0]
	type pending struct{ col, at, offsAt int }
	var todo []pending
	size := 0
	for i := range b.Columns {
		c := &b.Columns[i]
		f := colForm{elem: c.DType}
		if compact {
			f.elem = narrowest(c)
			if c.Kind == column.Fixed && c.Width > 1 && c.Len > 0 {
				f.trim = w.chooseTrim(c)
			}
		}
		w.forms = append(w.forms, f)
		if f.elem == c.DType && f.trim == trimNone {
			continue
		}
		at := size
		offsAt := len(w.offs)
		n := c.Values()
		if f.trim != trimNone {
			n = w.trimOffsets(c, f.trim)
		}
		size = at + (n*f.elem.Size()+7)&^7 // each column 8-byte aligned
		todo = append(todo, pending{i, at, offsAt})
	}
	if cap(w.buf) < size {
		w.buf = make([]byte, size)
	}
	w.buf = w.buf[:size]
	for _, p := range todo {
		w.fill(p.col, p.at, p.offsAt)
	}
}

// extra is the memory the wire form holds beyond the output batch.
func (w *wireUnit) extra() int { return len(w.buf) + 8*len(w.offs) }

// fill writes column i's wire form at buf[at:], its offsets (if trimmed)
// being offs[offsAt:].
func (w *wireUnit) fill(i, at, offsAt int) {
	c, wc, f := &w.src.Columns[i], &w.batch.Columns[i], w.forms[i]
	wc.DType = f.elem
	if f.trim == trimNone {
		n := c.Values()
		wc.Data = w.buf[at : at+n*f.elem.Size()]
		convert(wc.Data, f.elem, c.Data[:n*c.DType.Size()], c.DType)
		return
	}
	offs := w.offs[offsAt : offsAt+c.Len+1]
	wc.Kind, wc.Width, wc.Offsets = column.List, 0, offs
	wc.Data = w.buf[at : at+int(offs[c.Len])*f.elem.Size()]
	rowBytes, size, esize := c.Width*c.DType.Size(), c.DType.Size(), f.elem.Size()
	for j := range c.Len {
		k := int(offs[j+1] - offs[j])
		lo := 0
		if f.trim == trimHead {
			lo = c.Width - k
		}
		row := c.Data[j*rowBytes+lo*size : j*rowBytes+(lo+k)*size]
		convert(wc.Data[int(offs[j])*esize:int(offs[j+1])*esize], f.elem, row, c.DType)
	}
}

// trimOffsets appends to offs the offsets of c's rows trimmed as dir
// says (chooseTrim has counted them) and returns the elements kept.
func (w *wireUnit) trimOffsets(c *column.Column, dir int) int {
	kept := w.tail
	if dir == trimHead {
		kept = w.head
	}
	var n int64
	w.offs = append(w.offs, 0)
	for _, k := range kept[:c.Len] {
		n += int64(k)
		w.offs = append(w.offs, n)
	}
	return int(n)
}

// chooseTrim counts, for each row of c (fixed, width > 1), the elements
// left after dropping its trailing or its leading zero elements, and
// returns the direction that drops more, if it drops at least an eighth.
func (w *wireUnit) chooseTrim(c *column.Column) int {
	size := c.DType.Size()
	rowBytes := c.Width * size
	w.tail, w.head = slices.Grow(w.tail[:0], c.Len)[:c.Len], slices.Grow(w.head[:0], c.Len)[:c.Len]
	var tail, head int
	for j := range c.Len {
		row := c.Data[j*rowBytes : (j+1)*rowBytes]
		t := (lastNonzero(row) + size) / size // -1 (all zero) gives 0
		h := 0
		if t > 0 {
			h = c.Width - firstNonzero(row)/size
		}
		w.tail[j], w.head[j] = int32(t), int32(h)
		tail += t
		head += h
	}
	full := c.Len * c.Width
	switch {
	case tail <= head && tail <= full-full/8:
		return trimTail
	case head < tail && head <= full-full/8:
		return trimHead
	}
	return trimNone
}

// lastNonzero is the index of p's last nonzero byte, or -1.
func lastNonzero(p []byte) int {
	i := len(p)
	for i >= 8 && binary.LittleEndian.Uint64(p[i-8:i]) == 0 {
		i -= 8
	}
	for i > 0 {
		if p[i-1] != 0 {
			return i - 1
		}
		i--
	}
	return -1
}

// firstNonzero is the index of p's first nonzero byte, or len(p).
func firstNonzero(p []byte) int {
	i := 0
	for i+8 <= len(p) && binary.LittleEndian.Uint64(p[i:i+8]) == 0 {
		i += 8
	}
	for i < len(p) && p[i] == 0 {
		i++
	}
	return i
}

// narrowest is the smallest signed integer dtype that holds every value
// of c, an integer column; c's own dtype for any other.
func narrowest(c *column.Column) column.DType {
	if c.Kind == column.Bytes {
		return c.DType
	}
	n := c.Values()
	var lo, hi int64
	switch c.DType {
	case column.Int16:
		lo, hi = minMax(asSlice[int16](c.Data[:2*n]))
	case column.Int32:
		lo, hi = minMax(asSlice[int32](c.Data[:4*n]))
	case column.Int64:
		lo, hi = minMax(asSlice[int64](c.Data[:8*n]))
	default:
		return c.DType
	}
	for _, d := range []column.DType{column.Int8, column.Int16, column.Int32} {
		if d.Size() >= c.DType.Size() {
			break
		}
		if bits := 8 * d.Size(); lo >= -1<<(bits-1) && hi < 1<<(bits-1) {
			return d
		}
	}
	return c.DType
}

type integer interface{ int8 | int16 | int32 | int64 }

// minMax is the least and the greatest of v, 0 and 0 for none.
func minMax[T integer](v []T) (int64, int64) {
	if len(v) == 0 {
		return 0, 0
	}
	mn, mx := v[0], v[0]
	for _, x := range v {
		mn = min(mn, x)
		mx = max(mx, x)
	}
	return int64(mn), int64(mx)
}

// asSlice views b as a slice of T; b must be aligned for T.
func asSlice[T integer](b []byte) []T {
	var zero T
	n := len(b) / int(unsafe.Sizeof(zero))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// convert writes src's values (of dtype st) into dst (of dtype dt), both
// signed integers of the same count, narrowing or sign-extending each; a
// copy when the dtypes are the same.
func convert(dst []byte, dt column.DType, src []byte, st column.DType) {
	if dt == st {
		copy(dst, src)
		return
	}
	switch dt {
	case column.Int8:
		convertTo(asSlice[int8](dst), src, st)
	case column.Int16:
		convertTo(asSlice[int16](dst), src, st)
	case column.Int32:
		convertTo(asSlice[int32](dst), src, st)
	case column.Int64:
		convertTo(asSlice[int64](dst), src, st)
	default:
		panic(fmt.Sprintf("BUG: peer: convert to %v", dt))
	}
}

func convertTo[D integer](dst []D, src []byte, st column.DType) {
	switch st {
	case column.Int8:
		conv(dst, asSlice[int8](src))
	case column.Int16:
		conv(dst, asSlice[int16](src))
	case column.Int32:
		conv(dst, asSlice[int32](src))
	case column.Int64:
		conv(dst, asSlice[int64](src))
	default:
		panic(fmt.Sprintf("BUG: peer: convert from %v", st))
	}
}

func conv[D, S integer](dst []D, src []S) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] = D(v)
	}
}
