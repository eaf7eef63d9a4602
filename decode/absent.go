package decode

import "github.com/lastmile/lastmile/column"

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
