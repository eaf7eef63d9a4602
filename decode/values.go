package decode

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/format"
)

// pageValues is the value section of one data page.
type pageValues struct {
	d          *Decoder
	f          *Field
	c          *Chunk
	h          *pageHeader
	vals       []byte // as stored: compressed when compressed is set
	valsLen    int    // uncompressed length of vals
	compressed bool
	// lead >= 0 marks a v1 page decompressed whole: vals is the whole
	// compressed page, whose first lead bytes (the levels) precede the
	// values once decompressed.
	lead int
}

// fixedAt writes the page's n non-null fixed-width values densely at
// buf[start:]. A v1 page whose values can land in place is decompressed
// whole at buf[start-lead:], the lead bytes it overwrites there (the end
// of earlier values) saved and restored around it.
func (pv *pageValues) fixedAt(buf []byte, start, n int) error {
	need := n * pv.f.DType.Size()
	if pv.lead >= 0 && pv.h.encoding == encPlain && pv.valsLen == need && start >= pv.lead && !pv.f.converts() {
		d := pv.d
		lo := start - pv.lead
		d.save = append(d.save[:0], buf[lo:start]...)
		err := d.z.decompress(pv.c.Codec, buf[lo:start+need], pv.vals)
		copy(buf[lo:start], d.save)
		if err != nil {
			return corrupt(err)
		}
		return nil
	}
	return pv.fixed(buf[start:start+need], n)
}

// plain returns the uncompressed value bytes, decompressing into d.page
// when needed.
func (pv *pageValues) plain() ([]byte, error) {
	if !pv.compressed {
		return pv.vals, nil
	}
	d := pv.d
	if pv.lead >= 0 {
		d.page = growBytes(d.page, pv.lead+pv.valsLen)
		if err := d.z.decompress(pv.c.Codec, d.page, pv.vals); err != nil {
			return nil, corrupt(err)
		}
		return d.page[pv.lead:], nil
	}
	d.page = growBytes(d.page, pv.valsLen)
	if err := d.z.decompress(pv.c.Codec, d.page, pv.vals); err != nil {
		return nil, corrupt(err)
	}
	return d.page, nil
}

// fixed writes the page's n non-null values, densely, into dst
// (n*size bytes) for fixed-width dtypes (Bool included).
func (pv *pageValues) fixed(dst []byte, n int) error {
	f := pv.f
	size := f.DType.Size()
	if f.converts() && pv.h.encoding != encRLEDict && pv.h.encoding != encPlainDict {
		return pv.convertPage(dst, n)
	}
	switch pv.h.encoding {
	case encPlain:
		if f.DType == column.Bool {
			src, err := pv.plain()
			if err != nil {
				return err
			}
			if len(src)*8 < n {
				return corruptf("%d boolean values in %d bytes", n, len(src))
			}
			unpackBools(dst, src)
			return nil
		}
		need := n * size
		if pv.compressed && pv.valsLen == need && pv.lead < 0 {
			// The hot path: decompress straight into the column.
			if err := pv.d.z.decompress(pv.c.Codec, dst, pv.vals); err != nil {
				return corrupt(err)
			}
			return nil
		}
		src, err := pv.plain()
		if err != nil {
			return err
		}
		if len(src) < need {
			return corruptf("%d values of %d bytes in %d bytes", n, size, len(src))
		}
		copy(dst, src[:need])
		return nil
	case encRLE:
		return pv.rleBools(dst, n)
	case encByteStreamSplt:
		return pv.byteStreamSplit(dst, n)
	case encDeltaBinary:
		return pv.deltaFixed(dst, n)
	case encRLEDict, encPlainDict:
		idx, err := pv.indexes(n)
		if err != nil {
			return err
		}
		gatherElems(dst, pv.d.dict.data, size, idx)
		return nil
	}
	return fmt.Errorf("%w: encoding %s", ErrUnsupported, encodingName(pv.h.encoding))
}

// convertPage writes the page's n values, stored other than as the
// field's dtype (INT96, DECIMAL), into dst converted: an INT32 or INT64
// decimal's through the common paths of its stored integers, in any
// encoding; INT96 and FIXED_LEN_BYTE_ARRAY values from PLAIN pages, the
// only other encoding they have (dictionaries aside: readDict converts
// those).
func (pv *pageValues) convertPage(dst []byte, n int) error {
	f, d := pv.f, pv.d
	if f.Hash > 0 {
		return pv.hashPage(dst, n)
	}
	w := f.storedSize()
	if (f.Decimal || f.Unsigned || f.widened) && format.Type(f.Physical) != format.FixedLenByteArray {
		g := f.storedView()
		sv := *pv
		sv.f = &g
		d.conv = growBytes(d.conv, n*w)
		if err := sv.fixed(d.conv, n); err != nil {
			return err
		}
		return convertStored(f, dst, d.conv, n)
	}
	if pv.h.encoding != encPlain {
		return fmt.Errorf("%w: encoding %s for %v", ErrUnsupported, encodingName(pv.h.encoding), format.Type(f.Physical))
	}
	src, err := pv.plain()
	if err != nil {
		return err
	}
	if len(src) < n*w {
		return corruptf("%d values of %d bytes in %d bytes", n, w, len(src))
	}
	return convertStored(f, dst, src, n)
}

// rleBools writes the page's n RLE-encoded booleans into dst, one byte
// each. RLE is valid only for booleans.
func (pv *pageValues) rleBools(dst []byte, n int) error {
	f := pv.f
	if f.DType != column.Bool {
		return fmt.Errorf("%w: RLE encoding for %v values", ErrUnsupported, f.DType)
	}
	src, err := pv.plain()
	if err != nil {
		return err
	}
	if len(src) < 4 {
		return corruptf("RLE booleans without a length")
	}
	l := binary.LittleEndian.Uint32(src)
	if uint64(l) > uint64(len(src)-4) {
		return corruptf("RLE booleans of %d bytes in %d", l, len(src)-4)
	}
	if _, err := decodeLevels(dst[:n], src[4:4+l], 1); err != nil {
		return corruptf("RLE booleans: %v", err)
	}
	return nil
}

// byteStreamSplit writes the page's n BYTE_STREAM_SPLIT values into dst,
// interleaving the per-byte streams back into whole values.
func (pv *pageValues) byteStreamSplit(dst []byte, n int) error {
	f := pv.f
	size := f.DType.Size()
	if f.DType == column.Bool {
		return fmt.Errorf("%w: BYTE_STREAM_SPLIT for booleans", ErrUnsupported)
	}
	src, err := pv.plain()
	if err != nil {
		return err
	}
	if len(src) < n*size {
		return corruptf("%d values of %d bytes in %d bytes", n, size, len(src))
	}
	// Byte j of value i is at src[j*n+i].
	for j := range size {
		stream := src[j*n : (j+1)*n]
		for i, b := range stream {
			dst[i*size+j] = b
		}
	}
	return nil
}

// deltaFixed writes the page's n DELTA_BINARY_PACKED integers into dst,
// narrowing them to int32 for an Int32 column.
func (pv *pageValues) deltaFixed(dst []byte, n int) error {
	f := pv.f
	if f.DType != column.Int32 && f.DType != column.Int64 {
		return fmt.Errorf("%w: DELTA_BINARY_PACKED for %v values", ErrUnsupported, f.DType)
	}
	src, err := pv.plain()
	if err != nil {
		return err
	}
	v, _, err := pv.d.deltaInts(n, src)
	if err != nil {
		return corrupt(err)
	}
	if f.DType == column.Int64 {
		copy(asSlice[int64](dst), v)
	} else {
		out := asSlice[int32](dst)
		for i, x := range v {
			out[i] = int32(x)
		}
	}
	return nil
}

// indexes decodes n dictionary indexes, checked against the dictionary.
func (pv *pageValues) indexes(n int) ([]int32, error) {
	d := pv.d
	if !d.dict.ok {
		return nil, corruptf("dictionary-encoded page without a dictionary page")
	}
	src, err := pv.plain()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	if len(src) < 1 {
		return nil, corruptf("dictionary indexes without a bit width")
	}
	if cap(d.idx) < n {
		d.idx = make([]int32, n, n+n/8)
	}
	idx := d.idx[:n]
	m, err := decodeIndexes(idx, src[1:], uint(src[0]))
	if err != nil {
		return nil, corruptf("dictionary indexes: %v", err)
	}
	if m >= int64(d.dict.n) {
		return nil, corruptf("dictionary index %d, dictionary has %d values", m, d.dict.n)
	}
	return idx, nil
}

// appendBytes appends n rows of a BYTE_ARRAY column (nonNull of them
// non-null per def) to col's data and offsets: the values' ends first go
// to the offsets of the first nonNull rows, then move to their rows.
func (pv *pageValues) appendBytes(col *column.Column, def []uint8, maxDef uint8, n, nonNull int) error {
	L := col.Len
	need := L + n + 1
	if cap(col.Offsets) < need {
		no := make([]int64, len(col.Offsets), max(need, 2*cap(col.Offsets)))
		copy(no, col.Offsets)
		col.Offsets = no
	}
	offs := col.Offsets[:need]
	ends := offs[L+1 : L+1+nonNull]
	data := col.Data
	d := pv.d
	put := func(i int, data []byte) { ends[i] = int64(len(data)) }
	var err error
	switch pv.h.encoding {
	case encPlain:
		src, err := pv.plain()
		if err != nil {
			return err
		}
		data = reserve(data, len(src)-4*nonNull)
		r := plainBytes{src: src}
		for i := range nonNull {
			b, err := r.next(i)
			if err != nil {
				return err
			}
			data = append(data, b...)
			ends[i] = int64(len(data))
		}
	case encRLEDict, encPlainDict:
		idx, err := pv.indexes(nonNull)
		if err != nil {
			return err
		}
		dict := &d.dict
		for i, j := range idx {
			data = append(data, dict.data[dict.offs[j]:dict.offs[j+1]]...)
			ends[i] = int64(len(data))
		}
	case encDeltaLenBytes, encDeltaBytes:
		src, err2 := pv.plain()
		if err2 != nil {
			return err2
		}
		if pv.h.encoding == encDeltaLenBytes {
			data, err = d.deltaLengthBytes(nonNull, src, data, put)
		} else {
			data, err = d.deltaBytes(nonNull, src, data, put)
		}
		if err != nil {
			return corrupt(err)
		}
	default:
		return fmt.Errorf("%w: encoding %s for byte arrays", ErrUnsupported, encodingName(pv.h.encoding))
	}
	if nonNull < n {
		j := nonNull - 1
		for i := n - 1; i >= 0; i-- {
			if def[i] == maxDef {
				offs[L+1+i] = offs[L+1+j]
				j--
			} else if j >= 0 {
				offs[L+1+i] = offs[L+1+j]
			} else {
				offs[L+1+i] = offs[L]
			}
		}
	}
	col.Data = data
	col.Offsets = offs
	return nil
}

// reserve makes room for n more bytes without changing len(b).
func reserve(b []byte, n int) []byte {
	if n <= 0 || cap(b)-len(b) >= n {
		return b
	}
	return extend(b, n)[:len(b)]
}

func asSlice[T any](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// gatherElems gathers the size-byte elements of src at positions idx into
// dst: word-sized copies for the sizes of fixed columns (1, 2, 4, 8).
func gatherElems(dst, src []byte, size int, idx []int32) {
	switch size {
	case 8:
		gather(asSlice[uint64](dst), asSlice[uint64](src), idx)
	case 4:
		gather(asSlice[uint32](dst), asSlice[uint32](src), idx)
	case 2:
		gather(asSlice[uint16](dst), asSlice[uint16](src), idx)
	case 1:
		gather(dst, src, idx)
	default:
		for i, j := range idx {
			copy(dst[i*size:(i+1)*size], src[int(j)*size:])
		}
	}
}

func gather[T any](dst, dict []T, idx []int32) {
	dst = dst[:len(idx)]
	for i, j := range idx {
		dst[i] = dict[j]
	}
}

func unpackBools(dst, src []byte) {
	i := 0
	for ; i+8 <= len(dst); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], unpack1[src[i>>3]])
	}
	for ; i < len(dst); i++ {
		dst[i] = src[i>>3] >> (i & 7) & 1
	}
}

// spread moves the nonNull values packed at the front of region (elements
// of size bytes) to their slots, zeroing the slots of nulls. levels are
// the definition levels; a level >= slotMin is a slot, and a slot holds a
// value when its level is maxDef. Working backwards keeps it in place.
func spread(region []byte, size int, levels []uint8, maxDef, slotMin uint8, nonNull int) {
	switch size {
	case 8:
		spreadT(asSlice[uint64](region), levels, maxDef, slotMin, nonNull)
	case 4:
		spreadT(asSlice[uint32](region), levels, maxDef, slotMin, nonNull)
	case 2:
		spreadT(asSlice[uint16](region), levels, maxDef, slotMin, nonNull)
	default:
		spreadT(region, levels, maxDef, slotMin, nonNull)
	}
}

func spreadT[T uint8 | uint16 | uint32 | uint64](v []T, levels []uint8, maxDef, slotMin uint8, nonNull int) {
	s := len(v) - 1
	j := nonNull - 1
	for i := len(levels) - 1; i >= 0; i-- {
		l := levels[i]
		if l < slotMin {
			continue
		}
		if l == maxDef {
			v[s] = v[j]
			j--
		} else {
			v[s] = 0
		}
		s--
	}
}

// dictionary is a column chunk's decoded dictionary page.
type dictionary struct {
	ok   bool
	n    int
	data []byte  // fixed-width values, or byte-array contents
	offs []int64 // byte arrays: n+1 offsets into data
	own  []byte  // storage of byte-array contents
}

func (t *dictionary) reset() { t.ok, t.n = false, 0 }

// readDict decodes a dictionary page (PLAIN values) into d.dict.
func (d *Decoder) readDict(f *Field, c *Chunk, h *pageHeader, body []byte) error {
	if h.encoding != encPlain && h.encoding != encPlainDict {
		return fmt.Errorf("%w: dictionary encoding %s", ErrUnsupported, encodingName(h.encoding))
	}
	if f.DType == column.Bool {
		return fmt.Errorf("%w: dictionary-encoded booleans", ErrUnsupported)
	}
	src := body
	if c.Codec != codecNone {
		d.dictBuf = growBytes(d.dictBuf, int(h.uncompressed))
		if err := d.z.decompress(c.Codec, d.dictBuf, body); err != nil {
			return corrupt(err)
		}
		src = d.dictBuf
	} else if len(body) != int(h.uncompressed) {
		return corruptf("dictionary page of %d bytes, header says %d", len(body), h.uncompressed)
	}
	t := &d.dict
	n := int(h.numValues)
	if f.Hash > 0 {
		// At least 4 bytes a value (a length), or the fixed length:
		// checked before the hashes are sized by the header's count.
		w := 4
		if format.Type(f.Physical) == format.FixedLenByteArray {
			w = max(int(f.TypeLen), 1)
		}
		if len(src)/w < n {
			return corruptf("dictionary of %d values in %d bytes", n, len(src))
		}
		d.dictConv = growBytes(d.dictConv, n*8)
		hash := func() error { return hashPlain(d.dictConv, src, n, f.Hash) }
		if format.Type(f.Physical) == format.FixedLenByteArray {
			hash = func() error { return hashFixed(d.dictConv, src, n, int(f.TypeLen), f.Hash) }
		}
		if err := hash(); err != nil {
			return fmt.Errorf("dictionary page: %w", err)
		}
		t.data, t.n, t.ok = d.dictConv, n, true
		return nil
	}
	if f.converts() {
		if w := f.storedSize(); len(src) < n*w {
			return corruptf("dictionary of %d values of %d bytes in %d bytes", n, w, len(src))
		}
		d.dictConv = growBytes(d.dictConv, n*8)
		if err := convertStored(f, d.dictConv, src, n); err != nil {
			return err
		}
		t.data, t.n, t.ok = d.dictConv, n, true
		return nil
	}
	if f.Kind != column.Bytes {
		size := f.DType.Size()
		if len(src) < n*size {
			return corruptf("dictionary of %d values in %d bytes", n, len(src))
		}
		if c.Codec == codecNone { // src aliases d.raw; keep a copy
			d.dictBuf = append(d.dictBuf[:0], src[:n*size]...)
			src = d.dictBuf
		}
		t.data, t.n, t.ok = src[:n*size], n, true
		return nil
	}
	t.offs = append(t.offs[:0], 0)
	t.data = t.own[:0]
	r := plainBytes{src: src}
	for i := range n {
		b, err := r.next(i)
		if err != nil {
			return fmt.Errorf("dictionary page: %w", err)
		}
		t.data = append(t.data, b...)
		t.offs = append(t.offs, int64(len(t.data)))
	}
	t.own = t.data
	t.n, t.ok = n, true
	return nil
}

func encodingName(e int32) string {
	switch e {
	case encPlain:
		return "PLAIN"
	case encPlainDict:
		return "PLAIN_DICTIONARY"
	case encRLE:
		return "RLE"
	case encBitPacked:
		return "BIT_PACKED"
	case encDeltaBinary:
		return "DELTA_BINARY_PACKED"
	case encDeltaLenBytes:
		return "DELTA_LENGTH_BYTE_ARRAY"
	case encDeltaBytes:
		return "DELTA_BYTE_ARRAY"
	case encRLEDict:
		return "RLE_DICTIONARY"
	case encByteStreamSplt:
		return "BYTE_STREAM_SPLIT"
	}
	return fmt.Sprintf("encoding(%d)", e)
}
