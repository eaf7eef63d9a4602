package decode

import (
	"context"
	"fmt"
	"os"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/lastmile/lastmile/column"
)

// arrowDecoder decodes units with arrow-go's pqarrow record reader and
// copies the arrays into column.Columns (zeroing null slots, which arrow
// leaves undefined). It exists to be measured against the production
// Decoder (docs/decode.md).
type arrowDecoder struct {
	fields []Field
	files  map[string]*pqarrow.FileReader
	osf    []*os.File
}

func newArrowDecoder(fields []Field) *arrowDecoder {
	return &arrowDecoder{fields: fields, files: map[string]*pqarrow.FileReader{}}
}

func (a *arrowDecoder) Close() error {
	for _, f := range a.osf {
		f.Close()
	}
	a.files, a.osf = nil, nil
	return nil
}

func (a *arrowDecoder) reader(path string) (*pqarrow.FileReader, error) {
	if r, ok := a.files[path]; ok {
		return r, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	pr, err := file.NewParquetReader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	r, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		f.Close()
		return nil, err
	}
	a.files[path] = r
	a.osf = append(a.osf, f)
	return r, nil
}

// Decode reads rows [0, RowStart+Rows) of the row group and keeps the
// unit's: pqarrow's SeekToRow loses rows of repeated columns in v1 pages.
func (a *arrowDecoder) Decode(ctx context.Context, u Unit, dst *column.Batch) (err error) {
	fail := func(err error) error { return &Error{File: u.File, RowGroup: u.RowGroup, PageOffset: -1, Err: err} }
	defer func() {
		if r := recover(); r != nil {
			err = fail(fmt.Errorf("arrow panic: %v", r))
		}
	}()
	if err := absentIn(&u, a.fields); err != nil {
		return err
	}
	fr, err := a.reader(u.File)
	if err != nil {
		return fail(err)
	}
	end := int(u.RowStart + u.Rows)
	fr.Props.BatchSize = int64(end)
	leaves := make([]int, len(a.fields))
	for i := range a.fields {
		leaves[i] = u.Chunks[i].Leaf
	}
	rr, err := fr.GetRecordReader(ctx, leaves, []int{u.RowGroup})
	if err != nil {
		return fail(err)
	}
	defer rr.Release()
	if cap(dst.Columns) < len(a.fields) {
		dst.Columns = make([]column.Column, len(a.fields))
	}
	dst.Columns = dst.Columns[:len(a.fields)]
	for i := range a.fields {
		startColumn(&a.fields[i], &dst.Columns[i])
	}
	for dst.Columns[0].Len < end && rr.Next() {
		rec := rr.RecordBatch()
		for i := range a.fields {
			f := &a.fields[i]
			idx := rec.Schema().FieldIndices(f.Name)
			if len(idx) != 1 {
				return fail(fmt.Errorf("column %q not in the record batch", f.Name))
			}
			if err := appendArrow(f, rec.Column(idx[0]), &dst.Columns[i]); err != nil {
				return fail(fmt.Errorf("column %q: %w", f.Name, err))
			}
		}
	}
	if err := rr.Err(); err != nil {
		return fail(err)
	}
	for i := range dst.Columns {
		if dst.Columns[i].Len < end {
			return fail(fmt.Errorf("column %q: %d of %d rows", a.fields[i].Name, dst.Columns[i].Len, end))
		}
		endColumn(&dst.Columns[i], int(u.RowStart), end)
	}
	dst.Rows = int(u.Rows)
	return nil
}

// appendArrow appends the rows of arr to col.
func appendArrow(f *Field, arr arrow.Array, col *column.Column) error {
	n := arr.Len()
	valid := func(i int) bool { return arr.IsValid(i) }
	switch f.Kind {
	case column.Fixed:
		raw, err := fixedBytes(arr)
		if err != nil {
			return err
		}
		size := f.DType.Size()
		start := len(col.Data)
		col.Data = append(col.Data, raw[:n*size]...)
		for i := range n {
			ok := valid(i)
			if !ok {
				clear(col.Data[start+i*size : start+(i+1)*size])
			}
			if f.Nullable {
				col.Valid = append(col.Valid, b2u8(ok))
			}
		}
	case column.Bytes:
		var offs []int32
		var data []byte
		switch a := arr.(type) {
		case *array.String:
			offs, data = a.ValueOffsets(), a.ValueBytes()
		case *array.Binary:
			offs, data = a.ValueOffsets(), a.ValueBytes()
		default:
			return fmt.Errorf("arrow type %v for bytes", arr.DataType())
		}
		for i := range n {
			ok := valid(i)
			if ok {
				col.Data = append(col.Data, data[offs[i]-offs[0]:offs[i+1]-offs[0]]...)
			}
			col.Offsets = append(col.Offsets, int64(len(col.Data)))
			if f.Nullable {
				col.Valid = append(col.Valid, b2u8(ok))
			}
		}
	case column.List:
		l, ok := arr.(*array.List)
		if !ok {
			return fmt.Errorf("arrow type %v for a list", arr.DataType())
		}
		offs := l.Offsets()
		child := l.ListValues()
		raw, err := fixedBytes(child)
		if err != nil {
			return err
		}
		size := f.DType.Size()
		for i := range n {
			ok := valid(i)
			if ok {
				a, b := int(offs[i]), int(offs[i+1])
				start := len(col.Data)
				col.Data = append(col.Data, raw[a*size:b*size]...)
				for k := a; k < b; k++ {
					if child.IsNull(k) {
						clear(col.Data[start+(k-a)*size : start+(k-a+1)*size])
					}
				}
			}
			col.Offsets = append(col.Offsets, int64(len(col.Data)/size))
			if f.Nullable {
				col.Valid = append(col.Valid, b2u8(ok))
			}
		}
	}
	col.Len += n
	return nil
}

// fixedBytes returns the values of a fixed-width array as bytes, starting
// at the array's offset (booleans unpacked to one byte each).
func fixedBytes(arr arrow.Array) ([]byte, error) {
	switch a := arr.(type) {
	case *array.Int32:
		return sliceBytes(a.Int32Values()), nil
	case *array.Int64:
		return sliceBytes(a.Int64Values()), nil
	case *array.Timestamp: // INT96, read by arrow as timestamp[ns]
		return sliceBytes(a.TimestampValues()), nil
	case *array.Float32:
		return sliceBytes(a.Float32Values()), nil
	case *array.Float64:
		return sliceBytes(a.Float64Values()), nil
	case *array.Float16:
		v := a.Values()
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 2*len(v)), nil
	case *array.Boolean:
		b := make([]byte, a.Len())
		for i := range b {
			b[i] = b2u8(a.Value(i))
		}
		return b, nil
	}
	return nil, fmt.Errorf("arrow type %v for a fixed-width column", arr.DataType())
}

func sliceBytes[T ~int32 | ~int64 | ~float32 | ~float64](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(z)))
}
