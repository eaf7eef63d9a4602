package decode

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/format"
)

// Converted fields: values stored other than as the dtype they decode
// to. INT96 timestamps become int64 nanoseconds (int96.go), DECIMAL
// becomes float64 (decimal.go), UINT_32 becomes int64, and UINT_64 is
// int64 where it fits: torch has no uint64, and a value past 2^63 is
// refused (uint64Values) rather than read as a negative one, and a
// promoted INT32 or FLOAT column becomes int64 or float64 (promote.go).
// Their pages are never decompressed into place or viewed where they lie
// (the fast paths of page.go and values.go check converts); values are
// decoded as stored and converted (pageValues.convertPage), and a
// dictionary is converted once when its page is read (readDict), after
// which its indexes gather converted values like any other
// dictionary's.

// converts reports whether the field's values are stored other than as
// its dtype, so that no path may place or view stored values as decoded
// ones.
func (f *Field) converts() bool {
	return f.isInt96() || f.Decimal || f.Unsigned || f.Hash > 0 || f.widened
}

// storedSize is the width of one stored value of a field whose values
// convert: 12 for INT96, the fixed length of a FIXED_LEN_BYTE_ARRAY, 4
// or 8 for INT32 and INT64.
func (f *Field) storedSize() int {
	switch format.Type(f.Physical) {
	case format.Int96:
		return int96Size
	case format.FixedLenByteArray:
		return int(f.TypeLen)
	case format.Int32, format.Float:
		return 4
	}
	return 8
}

// storedView is f as its stored integers: the pages of an INT32 or
// INT64 decimal, or of a UINT_32, decode through the common paths (every
// encoding) into a scratch buffer, which convertStored then converts.
func (f *Field) storedView() Field {
	g := *f
	g.Decimal, g.Scale, g.Unsigned, g.widened, g.DType = false, 0, false, false, column.Int64
	switch format.Type(f.Physical) {
	case format.Int32:
		g.DType = column.Int32
	case format.Float:
		g.DType = column.Float32
	}
	return g
}

// convertStored converts n stored values of f at src into dst (8 bytes
// each).
func convertStored(f *Field, dst, src []byte, n int) error {
	if f.isInt96() {
		return int96Values(dst, src, n, f.int96Unit())
	}
	if f.widened {
		return widen(f, dst, src, n)
	}
	if f.Unsigned && format.Type(f.Physical) == format.Int32 {
		for i := range n {
			binary.LittleEndian.PutUint64(dst[i*8:], uint64(binary.LittleEndian.Uint32(src[i*4:])))
		}
		return nil
	}
	if f.Unsigned {
		return uint64Values(dst, src, n)
	}
	div := pow10[f.Scale]
	put := func(i int, v float64) { binary.LittleEndian.PutUint64(dst[i*8:], math.Float64bits(v/div)) }
	switch w := f.storedSize(); {
	case format.Type(f.Physical) == format.Int32:
		for i := range n {
			put(i, float64(int32(binary.LittleEndian.Uint32(src[i*4:]))))
		}
	case format.Type(f.Physical) == format.Int64:
		for i := range n {
			put(i, float64(int64(binary.LittleEndian.Uint64(src[i*8:]))))
		}
	default:
		for i := range n {
			put(i, beFloat(src[i*w:(i+1)*w]))
		}
	}
	return nil
}

// uint64Values copies n UINT_64 values of src into dst, refusing any
// past the largest int64 (its top bit set).
func uint64Values(dst, src []byte, n int) error {
	var top uint64
	for i := range n {
		v := binary.LittleEndian.Uint64(src[i*8:])
		top |= v
		binary.LittleEndian.PutUint64(dst[i*8:], v)
	}
	if top>>63 == 0 {
		return nil
	}
	for i := range n {
		if v := binary.LittleEndian.Uint64(src[i*8:]); v>>63 != 0 {
			return fmt.Errorf("%w: unsigned 64-bit value %d is past the largest int64 (torch has no uint64): "+
				"hash such ids into int64 where the table is written, or store the column as a signed INT64", ErrUnsupported, v)
		}
	}
	return nil
}
