package decode

import (
	"encoding/binary"
	"fmt"

	"github.com/cespare/xxhash/v2"
	"github.com/parquet-go/parquet-go/format"
)

// Hashed fields: string columns and lists of strings (and fixed-size
// binary ones: UUIDs, digests) read as int64 ids, the hashing trick of
// recommender models. A field with Hash = m decodes
// each string s to XXH64(s, seed 0) mod m, the value the expression
// hash_mod(s, m) gives a string (docs/expressions.md), so that hashing at
// decode and hashing in a pipeline agree. A string column becomes a fixed
// int64 column and a list<string> a list<int64>: every later stage (ops,
// the shuffle window, packing, a peer's Arrow form) sees integers only,
// and lists of strings, which the batch model has no room for, never
// exist in memory. A null string is a null id; a null element of a list
// is 0, as a null element of a list<int64> is.
//
// Hashed fields convert (Field.converts), so no fast path places or
// views their stored bytes as values: a page's strings are parsed from
// its PLAIN, DELTA_LENGTH_BYTE_ARRAY or DELTA_BYTE_ARRAY values and
// hashed one by one (hashPage), and a dictionary is hashed once when its
// page is read (hashDict), after which its indexes gather ids like any
// other dictionary's.

// hashPage writes the ids of the page's n non-null strings into dst.
func (pv *pageValues) hashPage(dst []byte, n int) error {
	d, m := pv.d, pv.f.Hash
	src, err := pv.plain()
	if err != nil {
		return err
	}
	switch pv.h.encoding {
	case encPlain:
		if w := int(pv.f.TypeLen); format.Type(pv.f.Physical) == format.FixedLenByteArray {
			return hashFixed(dst, src, n, w, m)
		}
		return hashPlain(dst, src, n, m)
	case encDeltaLenBytes, encDeltaBytes:
		last := 0
		put := func(i int, data []byte) {
			binary.LittleEndian.PutUint64(dst[i*8:], xxhash.Sum64(data[last:])%m)
			last = len(data)
		}
		scratch := d.conv[:0]
		if pv.h.encoding == encDeltaLenBytes {
			scratch, err = d.deltaLengthBytes(n, src, scratch, put)
		} else {
			scratch, err = d.deltaBytes(n, src, scratch, put)
		}
		if err != nil {
			return corrupt(err)
		}
		d.conv = scratch[:0]
		return nil
	}
	return fmt.Errorf("%w: encoding %s for byte arrays", ErrUnsupported, encodingName(pv.h.encoding))
}

// hashPlain writes the ids of the n PLAIN byte arrays at the front of
// src into dst.
func hashPlain(dst, src []byte, n int, m uint64) error {
	r := plainBytes{src: src}
	for i := range n {
		b, err := r.next(i)
		if err != nil {
			return err
		}
		binary.LittleEndian.PutUint64(dst[i*8:], xxhash.Sum64(b)%m)
	}
	return nil
}

// hashFixed writes the ids of the n PLAIN fixed-size values of w bytes
// (FIXED_LEN_BYTE_ARRAY) at the front of src into dst.
func hashFixed(dst, src []byte, n, w int, m uint64) error {
	if w <= 0 || len(src) < n*w {
		return corruptf("%d values of %d bytes in %d bytes", n, w, len(src))
	}
	for i := range n {
		binary.LittleEndian.PutUint64(dst[i*8:], xxhash.Sum64(src[i*w:(i+1)*w])%m)
	}
	return nil
}

// plainBytes walks PLAIN byte arrays: each a 4-byte little-endian
// length, then its bytes.
type plainBytes struct {
	src []byte
	p   int
}

// next returns value i, the next one.
func (r *plainBytes) next(i int) ([]byte, error) {
	if len(r.src)-r.p < 4 {
		return nil, corruptf("byte array value %d runs past the page", i)
	}
	l := int(binary.LittleEndian.Uint32(r.src[r.p:]))
	r.p += 4
	if l < 0 || l > len(r.src)-r.p {
		return nil, corruptf("byte array value %d of %d bytes runs past the page", i, l)
	}
	b := r.src[r.p : r.p+l]
	r.p += l
	return b, nil
}
