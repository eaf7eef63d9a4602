package decode

import (
	"encoding/binary"
	"fmt"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/format"
)

// appendNulls appends n null rows to col, which resetColumn prepared for
// a field whose chunk is absent (the file lacks the column, fieldid.go):
// zeros for a Fixed column's values, empty rows for a List or Bytes
// column, and a validity byte of 0 for each. Reused buffers are zeroed,
// as a column's null rows must hold zeros (column.Column).
func appendNulls(col *column.Column, n int) {
	if col.Kind == column.Fixed {
		at := len(col.Data)
		col.Data = extend(col.Data, n*col.Width*col.DType.Size())
		clear(col.Data[at:])
	} else {
		last := col.Offsets[len(col.Offsets)-1]
		for range n {
			col.Offsets = append(col.Offsets, last)
		}
	}
	at := len(col.Valid)
	col.Valid = extend(col.Valid, n)
	clear(col.Valid[at:])
	col.Len += n
}

// appendDefault appends n rows of the value v (Field.Default, as the
// column decodes) to col, prepared as for appendNulls: every row valid.
func appendDefault(col *column.Column, n int, v []byte) error {
	if col.Kind == column.Fixed {
		if len(v) != col.Width*col.DType.Size() {
			return corruptf("a default of %d bytes for %v values", len(v), col.DType)
		}
		at := len(col.Data)
		col.Data = extend(col.Data, n*len(v))
		for i := range n {
			copy(col.Data[at+i*len(v):], v)
		}
	} else {
		last := col.Offsets[len(col.Offsets)-1]
		col.Data = extend(col.Data, n*len(v))
		for i := range n {
			copy(col.Data[int(last)+i*len(v):], v)
			col.Offsets = append(col.Offsets, last+int64((i+1)*len(v)))
		}
	}
	if col.Valid != nil {
		at := len(col.Valid)
		col.Valid = extend(col.Valid, n)
		for i := range n {
			col.Valid[at+i] = 1
		}
	}
	col.Len += n
	return nil
}

// defaultValue is a column's initial default plain (its PLAIN encoding
// in the stored type, TableSchema.Defaults) as field f decodes it: hashed,
// a decimal converted, a boolean as a byte, a string without its length.
// A nil plain is no default (nulls).
func defaultValue(f *Field, plain []byte) ([]byte, error) {
	if plain == nil {
		return nil, nil
	}
	pt := format.Type(f.Physical)
	switch {
	case f.Kind == column.List:
		return nil, fmt.Errorf("%w: a default for a list", ErrUnsupported)
	case pt == format.ByteArray:
		if len(plain) < 4 || int(binary.LittleEndian.Uint32(plain)) != len(plain)-4 {
			return nil, corruptf("a BYTE_ARRAY default of %d bytes", len(plain))
		}
		if f.Hash > 0 {
			out := make([]byte, 8)
			return out, hashPlain(out, plain, 1, f.Hash)
		}
		return plain[4:], nil
	case f.Hash > 0 && pt == format.FixedLenByteArray:
		if len(plain) != int(f.TypeLen) {
			return nil, corruptf("a FIXED_LEN_BYTE_ARRAY(%d) default of %d bytes", f.TypeLen, len(plain))
		}
		out := make([]byte, 8)
		return out, hashFixed(out, plain, 1, int(f.TypeLen), f.Hash)
	case pt == format.Boolean:
		if len(plain) != 1 {
			return nil, corruptf("a BOOLEAN default of %d bytes", len(plain))
		}
		return []byte{plain[0] & 1}, nil
	case f.converts():
		if len(plain) != f.storedSize() {
			return nil, corruptf("a %v default of %d bytes", pt, len(plain))
		}
		out := make([]byte, 8)
		return out, convertStored(f, out, plain, 1)
	case len(plain) != f.DType.Size():
		return nil, corruptf("a %v default of %d bytes", f.DType, len(plain))
	}
	return plain, nil
}
