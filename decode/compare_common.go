package decode

import (
	"github.com/lastmile/lastmile/column"
)

// Helpers shared by the comparison paths (compare_parquetgo.go,
// compare_arrow.go): they assemble rows from levels and dense non-null
// values with simple loops, independent of the production page decoder so
// that the equality tests cross-check it.

// appendLeveled appends the rows of one page of a Fixed or List field,
// given its levels (nil when the field has none) and its non-null values
// packed densely (elements of the field's dtype size).
func appendLeveled(f *Field, rep, def []byte, dense []byte, nvals int, col *column.Column) {
	size := f.DType.Size()
	n := nvals
	if def != nil {
		n = len(def)
	} else if rep != nil {
		n = len(rep)
	}
	j := 0 // next dense value
	put := func(present bool) {
		if present {
			col.Data = append(col.Data, dense[j*size:(j+1)*size]...)
			j++
		} else {
			col.Data = append(col.Data, make([]byte, size)...)
		}
	}
	maxDef := uint8(f.MaxDef)
	if f.MaxRep == 0 {
		for i := range n {
			ok := def == nil || def[i] == maxDef
			put(ok)
			if f.Nullable {
				col.Valid = append(col.Valid, b2u8(ok))
			}
			col.Len++
		}
		return
	}
	rowDef := uint8(f.RowDef)
	for i := range n {
		l := maxDef
		if def != nil {
			l = def[i]
		}
		if rep[i] == 0 {
			col.Offsets = append(col.Offsets, col.Offsets[len(col.Offsets)-1])
			if f.Nullable {
				col.Valid = append(col.Valid, b2u8(l >= rowDef))
			}
			col.Len++
		}
		if l > rowDef {
			put(l == maxDef)
			col.Offsets[len(col.Offsets)-1]++
		}
	}
}

// appendByteRows appends n rows of a Bytes field; value(k) returns the
// k-th non-null value.
func appendByteRows(f *Field, def []byte, n int, value func(k int) []byte, col *column.Column) {
	k := 0
	for i := range n {
		ok := def == nil || def[i] == uint8(f.MaxDef)
		if ok {
			col.Data = append(col.Data, value(k)...)
			k++
		}
		col.Offsets = append(col.Offsets, int64(len(col.Data)))
		if f.Nullable {
			col.Valid = append(col.Valid, b2u8(ok))
		}
		col.Len++
	}
}

// startColumn resets col for field f (as the production decoder does).
func startColumn(f *Field, col *column.Column) {
	col.Name, col.Kind, col.DType, col.Width, col.Len = f.Name, f.Kind, f.DType, 1, 0
	col.Data = col.Data[:0]
	col.Offsets = col.Offsets[:0]
	if f.Kind != column.Fixed {
		col.Offsets = append(col.Offsets, 0)
	} else {
		col.Offsets = nil
	}
	col.Valid = col.Valid[:0]
	if !f.Nullable {
		col.Valid = nil
	}
}

// endColumn keeps rows [a, b) of what was appended and applies the rule
// that Valid is nil when no row is null.
func endColumn(col *column.Column, a, b int) {
	if a > 0 {
		size := col.DType.Size()
		if col.Kind == column.Fixed {
			col.Data = col.Data[a*size:]
		} else {
			base := col.Offsets[a]
			col.Data = col.Data[int(base)*size:]
			col.Offsets = col.Offsets[a:]
			for i := range col.Offsets {
				col.Offsets[i] -= base
			}
		}
		if col.Valid != nil {
			col.Valid = col.Valid[a:]
		}
		col.Len -= a
		b -= a
	}
	truncateColumn(col, b)
	if col.Valid != nil && allEqual(col.Valid, 1) {
		col.Valid = nil
	}
}
