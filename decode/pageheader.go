package decode

import (
	"errors"
	"fmt"
)

// Parquet page types and encodings (parquet.thrift), as the page header
// carries them.
const (
	pageData       = 0
	pageIndex      = 1
	pageDictionary = 2
	pageDataV2     = 3

	encPlain          = 0
	encPlainDict      = 2
	encRLE            = 3
	encBitPacked      = 4
	encDeltaBinary    = 5
	encDeltaLenBytes  = 6
	encDeltaBytes     = 7
	encRLEDict        = 8
	encByteStreamSplt = 9
)

// pageHeader is the part of a Parquet PageHeader the decoder uses. It is
// parsed by hand rather than with the reflective thrift decoder: page
// headers are read once per page on the hot path, must not allocate, and
// are outside input the fuzzer exercises directly.
type pageHeader struct {
	typ          int32
	uncompressed int32
	compressed   int32

	// Data pages (v1 and v2) and dictionary pages.
	numValues int32
	encoding  int32

	// v1 data pages.
	defEncoding int32
	repEncoding int32

	// v2 data pages.
	numNulls     int32
	numRows      int32
	defLen       int32
	repLen       int32
	isCompressed bool

	// crc is the CRC-32 (IEEE) of the page's bytes after the header, as
	// stored; hasCRC says the writer gave one (it is optional).
	crc    int32
	hasCRC bool
}

var errThrift = errors.New("malformed thrift page header")

// thrift compact-protocol type codes.
const (
	tStop   = 0
	tTrue   = 1
	tFalse  = 2
	tByte   = 3
	tI16    = 4
	tI32    = 5
	tI64    = 6
	tDouble = 7
	tBinary = 8
	tList   = 9
	tSet    = 10
	tMap    = 11
	tStruct = 12
)

type thriftReader struct {
	b   []byte
	pos int
	// alloc is what a reflective decoder would allocate, at most, for the
	// lists, maps and structs skipped so far (checkThrift, thriftcheck.go).
	alloc int64
}

func (r *thriftReader) byte() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, errThrift
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

func (r *thriftReader) uvarint() (uint64, error) {
	var x uint64
	for shift := uint(0); shift < 64; shift += 7 {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return x, nil
		}
	}
	return 0, errThrift
}

func (r *thriftReader) varint() (int64, error) {
	u, err := r.uvarint()
	return int64(u>>1) ^ -int64(u&1), err
}

func (r *thriftReader) i32() (int32, error) {
	v, err := r.varint()
	if err != nil {
		return 0, err
	}
	if v != int64(int32(v)) {
		return 0, errThrift
	}
	return int32(v), nil
}

// field reads a field header and returns its id and type; typ tStop ends
// the struct. last is the previous field id (delta encoding).
func (r *thriftReader) field(last int16) (int16, byte, error) {
	c, err := r.byte()
	if err != nil {
		return 0, 0, err
	}
	typ := c & 0x0f
	if typ == tStop {
		return 0, tStop, nil
	}
	if d := int16(c >> 4); d != 0 {
		return last + d, typ, nil
	}
	id, err := r.varint()
	if err != nil {
		return 0, 0, err
	}
	return int16(id), typ, nil
}

// skip moves past a value of thrift type typ, nested depth deep, without
// decoding it. The depth bound keeps a corrupt header from recursing
// without limit.
func (r *thriftReader) skip(typ byte, depth int) error {
	if depth > 16 {
		return errThrift
	}
	switch typ {
	case tTrue, tFalse:
		return nil
	case tByte:
		_, err := r.byte()
		return err
	case tI16, tI32, tI64:
		_, err := r.uvarint()
		return err
	case tDouble:
		if len(r.b)-r.pos < 8 {
			return errThrift
		}
		r.pos += 8
		return nil
	case tBinary:
		n, err := r.uvarint()
		if err != nil {
			return err
		}
		if n > uint64(len(r.b)-r.pos) {
			return errThrift
		}
		r.pos += int(n)
		return nil
	case tList, tSet:
		return r.skipList(depth)
	case tMap:
		return r.skipMap(depth)
	case tStruct:
		return r.skipStruct(depth)
	}
	return errThrift
}

// skipList moves past a list or set, whose elements are one level deeper
// than depth.
func (r *thriftReader) skipList(depth int) error {
	n, et, err := r.listHeader()
	if err != nil {
		return err
	}
	r.alloc += int64(n) * thriftElemBytes(et)
	for i := uint64(0); i < n; i++ {
		if et == tTrue || et == tFalse { // bools in lists take a byte
			if _, err := r.byte(); err != nil {
				return err
			}
			continue
		}
		if err := r.skip(et, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// listHeader reads a list or set header: its length, checked against the
// bytes left, and its element type.
func (r *thriftReader) listHeader() (n uint64, et byte, err error) {
	c, err := r.byte()
	if err != nil {
		return 0, 0, err
	}
	n = uint64(c >> 4)
	if n == 15 {
		if n, err = r.uvarint(); err != nil {
			return 0, 0, err
		}
	}
	if n > uint64(len(r.b)-r.pos) { // every element takes a byte at least
		return 0, 0, errThrift
	}
	return n, c & 0x0f, nil
}

// skipMap moves past a map, whose keys and values are one level deeper
// than depth.
func (r *thriftReader) skipMap(depth int) error {
	n, err := r.uvarint()
	if err != nil || n == 0 {
		return err
	}
	if n > uint64(len(r.b)-r.pos) {
		return errThrift
	}
	kv, err := r.byte()
	if err != nil {
		return err
	}
	r.alloc += int64(n) * (thriftElemBytes(kv>>4) + thriftElemBytes(kv&0x0f) + 48) // 48: a map entry's overhead
	for i := uint64(0); i < n; i++ {
		if err := r.skip(kv>>4, depth+1); err != nil {
			return err
		}
		if err := r.skip(kv&0x0f, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// skipStruct moves past a struct up to and including its stop field; its
// fields are one level deeper than depth.
func (r *thriftReader) skipStruct(depth int) error {
	r.alloc += structFieldBytes
	var last int16
	for {
		id, t, err := r.field(last)
		if err != nil {
			return err
		}
		if t == tStop {
			return nil
		}
		if err := r.skip(t, depth+1); err != nil {
			return err
		}
		last = id
	}
}

// structI32s reads a struct whose interesting fields are all i32 or bool,
// calling set for each; other fields are skipped.
func (r *thriftReader) structFields(set func(id int16, typ byte) (bool, error)) error {
	var last int16
	for {
		id, typ, err := r.field(last)
		if err != nil {
			return err
		}
		if typ == tStop {
			return nil
		}
		used, err := set(id, typ)
		if err != nil {
			return err
		}
		if !used {
			if err := r.skip(typ, 1); err != nil {
				return err
			}
		}
		last = id
	}
}

// parsePageHeader parses the page header at the start of b and returns it
// with its encoded length. It checks the sizes a decoder relies on.
func parsePageHeader(b []byte, h *pageHeader) (int, error) {
	*h = pageHeader{isCompressed: true, typ: -1}
	r := thriftReader{b: b}
	var seen uint32
	err := r.structFields(func(id int16, typ byte) (bool, error) {
		switch id {
		case 1:
			seen |= 1
			return r.i32Field(typ, &h.typ)
		case 2:
			seen |= 2
			return r.i32Field(typ, &h.uncompressed)
		case 3:
			seen |= 4
			return r.i32Field(typ, &h.compressed)
		case 4:
			ok, err := r.i32Field(typ, &h.crc)
			h.hasCRC = ok
			return ok, err
		case 5: // DataPageHeader
			if typ != tStruct {
				return false, nil
			}
			seen |= 8
			return true, r.dataPageHeader(h)
		case 7: // DictionaryPageHeader
			if typ != tStruct {
				return false, nil
			}
			seen |= 16
			return true, r.dictPageHeader(h)
		case 8: // DataPageHeaderV2
			if typ != tStruct {
				return false, nil
			}
			seen |= 32
			return true, r.dataPageHeaderV2(h)
		}
		return false, nil
	})
	if err != nil {
		return 0, err
	}
	if err := checkPageHeader(h, seen); err != nil {
		return 0, err
	}
	return r.pos, nil
}

// i32Field reads an i32 field into dst and reports that it did; a field
// of another type is left for the caller to skip.
func (r *thriftReader) i32Field(typ byte, dst *int32) (bool, error) {
	if typ != tI32 {
		return false, nil
	}
	v, err := r.i32()
	*dst = v
	return true, err
}

// i32At reads field id into fields[id-1] when it is an i32 field and
// fields has a place for it; any other field is left for the caller to
// skip.
func (r *thriftReader) i32At(fields []*int32, id int16, typ byte) (bool, error) {
	if id < 1 || int(id) > len(fields) {
		return false, nil
	}
	return r.i32Field(typ, fields[id-1])
}

// dataPageHeader reads a DataPageHeader (v1) struct's fields into h:
// num_values, encoding, definition and repetition level encodings.
func (r *thriftReader) dataPageHeader(h *pageHeader) error {
	ints := [...]*int32{&h.numValues, &h.encoding, &h.defEncoding, &h.repEncoding}
	return r.structFields(func(id int16, typ byte) (bool, error) {
		return r.i32At(ints[:], id, typ)
	})
}

// dictPageHeader reads a DictionaryPageHeader struct's fields into h:
// num_values and encoding.
func (r *thriftReader) dictPageHeader(h *pageHeader) error {
	ints := [...]*int32{&h.numValues, &h.encoding}
	return r.structFields(func(id int16, typ byte) (bool, error) {
		return r.i32At(ints[:], id, typ)
	})
}

// dataPageHeaderV2 reads a DataPageHeaderV2 struct's fields into h: six
// i32s, then is_compressed.
func (r *thriftReader) dataPageHeaderV2(h *pageHeader) error {
	ints := [...]*int32{&h.numValues, &h.numNulls, &h.numRows, &h.encoding, &h.defLen, &h.repLen}
	return r.structFields(func(id int16, typ byte) (bool, error) {
		if id == 7 && (typ == tTrue || typ == tFalse) {
			h.isCompressed = typ == tTrue
			return true, nil
		}
		return r.i32At(ints[:], id, typ)
	})
}

// checkPageHeader checks a parsed header for what the decoder relies on:
// the type and sizes present and not negative, the struct its page type
// needs present (seen holds a bit per field parsePageHeader read), and a
// v2 page's level lengths within the page.
func checkPageHeader(h *pageHeader, seen uint32) error {
	if seen&7 != 7 {
		return fmt.Errorf("%w: missing type or sizes", errThrift)
	}
	if h.uncompressed < 0 || h.compressed < 0 || h.numValues < 0 {
		return fmt.Errorf("%w: negative size", errThrift)
	}
	switch h.typ {
	case pageData:
		if seen&8 == 0 {
			return fmt.Errorf("%w: data page without DataPageHeader", errThrift)
		}
	case pageDictionary:
		if seen&16 == 0 {
			return fmt.Errorf("%w: dictionary page without DictionaryPageHeader", errThrift)
		}
	case pageDataV2:
		if seen&32 == 0 {
			return fmt.Errorf("%w: v2 data page without DataPageHeaderV2", errThrift)
		}
		if h.numNulls < 0 || h.numRows < 0 || h.defLen < 0 || h.repLen < 0 ||
			h.numNulls > h.numValues || int64(h.defLen)+int64(h.repLen) > int64(h.compressed) {
			return fmt.Errorf("%w: inconsistent v2 data page header", errThrift)
		}
	}
	return nil
}
