package peer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cespare/xxhash/v2"

	"github.com/lastmile/lastmile/column"
)

// The wire form of a unit's output
//
// A unit's output (a column.Batch) travels as Arrow record batches of at
// most maxRecordBytes each, slices of its rows in order, under one schema:
// for every column a field of the Arrow type that holds its bytes as they
// are (int64 as int64, a [B, W] column as a fixed-size list of W, a list
// column as a large list with int64 offsets, a bytes column as large
// binary; bool, bfloat16 and float16 as uint8, uint16 and float16
// storage), with the column's kind, dtype and width in the field's
// metadata, and for a column with a validity vector a second field
// "NAME\x00valid" of uint8, one byte per row as in column.Column. Nothing
// is converted, so what arrives is byte for byte what the peer computed:
// the checksum of the whole unit, computed on both sides, proves it.

// maxRecordBytes bounds one record batch (SPILL-NOTES.md: 1 to 8 MiB keeps
// gRPC frames and the receiver's copies cheap).
const maxRecordBytes = 4 << 20

const validSuffix = "\x00valid"

// storage maps a dtype to the Arrow type that holds its bytes unchanged.
func storage(d column.DType) (arrow.DataType, error) {
	switch d {
	case column.Bool, column.Uint8:
		return arrow.PrimitiveTypes.Uint8, nil
	case column.Int8:
		return arrow.PrimitiveTypes.Int8, nil
	case column.Int16:
		return arrow.PrimitiveTypes.Int16, nil
	case column.Int32:
		return arrow.PrimitiveTypes.Int32, nil
	case column.Int64:
		return arrow.PrimitiveTypes.Int64, nil
	case column.Float16:
		return arrow.FixedWidthTypes.Float16, nil
	case column.BFloat16:
		return arrow.PrimitiveTypes.Uint16, nil
	case column.Float32:
		return arrow.PrimitiveTypes.Float32, nil
	case column.Float64:
		return arrow.PrimitiveTypes.Float64, nil
	}
	return nil, fmt.Errorf("dtype %v has no wire form", d)
}

// schema returns the Arrow schema of w: each field's type says how its
// column travels (compact.go), its metadata the column's own kind, dtype
// and width, and whether its rows were trimmed.
func (w *wireUnit) schema() (*arrow.Schema, error) {
	var fields []arrow.Field
	for i := range w.src.Columns {
		c := &w.src.Columns[i]
		t, err := arrowType(&w.batch.Columns[i], w.compact)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", c.Name, err)
		}
		keys := []string{"lastmile.kind", "lastmile.dtype", "lastmile.width"}
		vals := []string{strconv.Itoa(int(c.Kind)), strconv.Itoa(int(c.DType)), strconv.Itoa(c.Width)}
		if tr := w.forms[i].trim; tr != trimNone {
			keys, vals = append(keys, "lastmile.trim"), append(vals, trimNames[tr])
		}
		fields = append(fields, arrow.Field{Name: c.Name, Type: t, Metadata: arrow.NewMetadata(keys, vals)})
		if c.Valid != nil {
			fields = append(fields, arrow.Field{Name: c.Name + validSuffix, Type: arrow.PrimitiveTypes.Uint8})
		}
	}
	return arrow.NewSchema(fields, nil), nil
}

// arrowType is the Arrow type c travels as: in the compact form, lists
// and bytes with int32 offsets.
func arrowType(c *column.Column, compact bool) (arrow.DataType, error) {
	st, err := storage(c.DType)
	if err != nil {
		return nil, err
	}
	switch c.Kind {
	case column.Fixed:
		if c.Width > 1 {
			return arrow.FixedSizeListOfNonNullable(int32(c.Width), st), nil
		}
		return st, nil
	case column.List:
		if compact {
			return arrow.ListOfNonNullable(st), nil
		}
		return arrow.LargeListOfNonNullable(st), nil
	case column.Bytes:
		if compact {
			return arrow.BinaryTypes.Binary, nil
		}
		return arrow.BinaryTypes.LargeBinary, nil
	}
	return nil, fmt.Errorf("kind %v has no wire form", c.Kind)
}

// Records cuts b into record batches of whole rows, each at most about
// maxRecordBytes (a single row larger than that goes alone), and calls
// emit with each, last true for the last one (there is always one, with
// no rows for an empty b). The records view b's memory: emit must be done
// with one (written it out) before b changes.
func Records(b *column.Batch, schema *arrow.Schema, emit func(rec arrow.RecordBatch, last bool) error) error {
	if b.Rows == 0 {
		rec := slice(b, schema, 0, 0)
		defer rec.Release()
		return emit(rec, true)
	}
	for lo := 0; lo < b.Rows; {
		hi := lo + 1
		size := rowBytes(b, lo, hi)
		for hi < b.Rows {
			n := rowBytes(b, hi, hi+1)
			if size+n > maxRecordBytes {
				break
			}
			size += n
			hi++
		}
		rec := slice(b, schema, lo, hi)
		err := emit(rec, hi == b.Rows)
		rec.Release()
		if err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

// rowBytes is the wire size of rows [lo, hi) of b.
func rowBytes(b *column.Batch, lo, hi int) int {
	n := 0
	for i := range b.Columns {
		c := &b.Columns[i]
		size := c.DType.Size()
		if c.Kind == column.Fixed {
			n += (hi - lo) * c.Width * size
		} else {
			n += int(c.Offsets[hi]-c.Offsets[lo])*size + 8*(hi-lo)
		}
		if c.Valid != nil {
			n += hi - lo
		}
	}
	return n
}

// slice builds the record of rows [lo, hi) of b, viewing b's bytes; list
// offsets are rebased to start at 0.
func slice(b *column.Batch, schema *arrow.Schema, lo, hi int) arrow.RecordBatch {
	var cols []arrow.Array
	k := 0
	for i := range b.Columns {
		c := &b.Columns[i]
		f := schema.Field(k)
		size := c.DType.Size()
		var d *array.Data
		switch c.Kind {
		case column.Fixed:
			vals := c.Data[lo*c.Width*size : hi*c.Width*size]
			if c.Width > 1 {
				st := f.Type.(*arrow.FixedSizeListType).Elem()
				child := array.NewData(st, (hi-lo)*c.Width, []*memory.Buffer{nil, memory.NewBufferBytes(vals)}, nil, 0, 0)
				d = array.NewData(f.Type, hi-lo, []*memory.Buffer{nil}, []arrow.ArrayData{child}, 0, 0)
				child.Release()
			} else {
				d = array.NewData(f.Type, hi-lo, []*memory.Buffer{nil, memory.NewBufferBytes(vals)}, nil, 0, 0)
			}
		default:
			ob, n := offsetsBuffer(c.Offsets[lo:hi+1], f.Type)
			base := c.Offsets[lo]
			vals := memory.NewBufferBytes(c.Data[base*int64(size) : (base+n)*int64(size)])
			if c.Kind == column.Bytes {
				d = array.NewData(f.Type, hi-lo, []*memory.Buffer{nil, ob, vals}, nil, 0, 0)
			} else {
				st := f.Type.(arrow.ListLikeType).Elem()
				child := array.NewData(st, int(n), []*memory.Buffer{nil, vals}, nil, 0, 0)
				d = array.NewData(f.Type, hi-lo, []*memory.Buffer{nil, ob}, []arrow.ArrayData{child}, 0, 0)
				child.Release()
			}
		}
		cols = append(cols, array.MakeFromData(d))
		d.Release()
		k++
		if c.Valid != nil {
			vd := array.NewData(arrow.PrimitiveTypes.Uint8, hi-lo, []*memory.Buffer{nil, memory.NewBufferBytes(c.Valid[lo:hi])}, nil, 0, 0)
			cols = append(cols, array.MakeFromData(vd))
			vd.Release()
			k++
		}
	}
	rec := array.NewRecordBatch(schema, cols, int64(hi-lo))
	for _, a := range cols {
		a.Release()
	}
	return rec
}

// offsetsBuffer rebases offs to start at 0, as int64 for a large list or
// binary type and int32 otherwise, and returns them with the elements
// they span.
func offsetsBuffer(offs []int64, t arrow.DataType) (*memory.Buffer, int64) {
	base, n := offs[0], offs[len(offs)-1]-offs[0]
	if largeOffsets(t) {
		o := make([]int64, len(offs))
		for j, v := range offs {
			o[j] = v - base
		}
		return memory.NewBufferBytes(int64Bytes(o)), n
	}
	o := make([]int32, len(offs))
	for j, v := range offs {
		o[j] = int32(v - base)
	}
	return memory.NewBufferBytes(unsafe.Slice((*byte)(unsafe.Pointer(&o[0])), 4*len(o))), n
}

// largeOffsets says whether lists or bytes of type t have int64 offsets.
func largeOffsets(t arrow.DataType) bool {
	switch t.(type) {
	case *arrow.LargeListType, *arrow.LargeBinaryType:
		return true
	}
	return false
}

func int64Bytes(v []int64) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 8*len(v))
}

func bytesInt64(b []byte) []int64 {
	if len(b) < 8 {
		return nil
	}
	return unsafe.Slice((*int64)(unsafe.Pointer(&b[0])), len(b)/8)
}

// Assembler rebuilds a unit's output from its records, appending each to
// the batch it was given: one copy of the bytes (sign-extending narrowed
// values, padding trimmed rows back), into buffers the batch already owns
// once it has been used. It reads the plain and the compact form alike.
type Assembler struct {
	// MaxRows, if positive, is the most rows the unit may have: a stream
	// with more is refused at the first record past it, before its rows
	// are held (a unit's output never has more rows than the unit).
	MaxRows int
	out     *column.Batch
	cols    []colMap // per output column: how it travels
	tmp     []int64  // a record's int32 offsets, widened
}

// colMap is how one output column travels: its wire field and validity
// field, the dtype its values travel in, whether its offsets are int64,
// and how its rows were trimmed.
type colMap struct {
	field, valid int
	elem         column.DType
	wide         bool
	trim         int
}

// NewAssembler starts rebuilding into out, which is reset; schema is the
// stream's.
func NewAssembler(schema *arrow.Schema, out *column.Batch) (*Assembler, error) {
	a := &Assembler{out: out}
	out.Rows = 0
	n := 0
	for i := 0; i < schema.NumFields(); i++ {
		if f := schema.Field(i); len(f.Name) < len(validSuffix) || f.Name[len(f.Name)-len(validSuffix):] != validSuffix {
			n++
		}
	}
	if cap(out.Columns) < n {
		out.Columns = append(out.Columns[:cap(out.Columns)], make([]column.Column, n-cap(out.Columns))...)
	}
	out.Columns = out.Columns[:n]
	k := 0
	for i := 0; i < schema.NumFields(); i++ {
		f := schema.Field(i)
		if strings.HasSuffix(f.Name, validSuffix) {
			// A column's validity: right after the column, once, as
			// uint8 (a field of the peer's that is not is a corrupt
			// stream, never an index past the columns).
			if k == 0 || f.Name != out.Columns[k-1].Name+validSuffix || a.cols[k-1].valid >= 0 ||
				!arrow.TypeEqual(f.Type, arrow.PrimitiveTypes.Uint8) {
				return nil, fmt.Errorf("wire field %q: not the validity of the column before it", f.Name)
			}
			a.cols[k-1].valid = i
			out.Columns[k-1].Valid = out.Columns[k-1].Valid[:0]
			continue
		}
		c := &out.Columns[k]
		kind, dtype, width, trim, err := fieldMeta(f)
		if err != nil {
			return nil, err
		}
		m := colMap{field: i, valid: -1, trim: trim}
		if m.elem, m.wide, err = travelsAs(f.Type, kind, dtype, width, trim); err != nil {
			return nil, fmt.Errorf("wire field %q: %w", f.Name, err)
		}
		*c = column.Column{Name: f.Name, Kind: kind, DType: dtype, Width: width,
			Data: c.Data[:0], Offsets: c.Offsets[:0], Valid: nil}
		if kind != column.Fixed {
			c.Offsets = append(c.Offsets, 0)
		}
		a.cols = append(a.cols, m)
		k++
	}
	for i := range a.cols {
		if a.cols[i].valid >= 0 && out.Columns[i].Valid == nil {
			out.Columns[i].Valid = []byte{}
		}
	}
	return a, nil
}

func fieldMeta(f arrow.Field) (kind column.Kind, dtype column.DType, width, trim int, err error) {
	get := func(key string) (int, error) {
		i := f.Metadata.FindKey(key)
		if i < 0 {
			return 0, fmt.Errorf("wire field %q lacks %s", f.Name, key)
		}
		return strconv.Atoi(f.Metadata.Values()[i])
	}
	k, err1 := get("lastmile.kind")
	d, err2 := get("lastmile.dtype")
	width, err3 := get("lastmile.width")
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, 0, 0, 0, err
	}
	if k < 0 || k > int(column.Bytes) || column.DType(d).Size() == 0 || width < 0 || width > 1<<20 || k == int(column.Fixed) && width < 1 {
		return 0, 0, 0, 0, fmt.Errorf("wire field %q: kind %d dtype %d width %d", f.Name, k, d, width)
	}
	if i := f.Metadata.FindKey("lastmile.trim"); i >= 0 {
		if trim = slices.Index(trimNames[:], f.Metadata.Values()[i]); trim <= trimNone {
			return 0, 0, 0, 0, fmt.Errorf("wire field %q: trimmed %q", f.Name, f.Metadata.Values()[i])
		}
	}
	return column.Kind(k), column.DType(d), width, trim, nil
}

// travelsAs checks that a field of Arrow type t can carry a column of
// kind, dtype and width, trimmed as trim says, and returns the dtype its
// values travel in and whether its offsets are int64.
func travelsAs(t arrow.DataType, kind column.Kind, dtype column.DType, width, trim int) (column.DType, bool, error) {
	want, err := storage(dtype)
	if err != nil {
		return 0, false, err
	}
	trimmed := kind == column.Fixed && width > 1 && trim != trimNone
	var vt arrow.DataType // the values' type
	ok := trim == trimNone || trimmed
	switch t := t.(type) {
	case *arrow.FixedSizeListType:
		ok = ok && !trimmed && kind == column.Fixed && width > 1 && int(t.Len()) == width
		vt = t.Elem()
	case *arrow.ListType, *arrow.LargeListType:
		ok = ok && (kind == column.List || trimmed)
		vt = t.(arrow.ListLikeType).Elem()
	case *arrow.BinaryType, *arrow.LargeBinaryType:
		ok = ok && kind == column.Bytes
		vt = want
	default:
		ok = ok && kind == column.Fixed && width <= 1
		vt = t
	}
	if !ok {
		return 0, false, fmt.Errorf("type %v does not carry a column of kind %v, width %d, trim %d", t, kind, width, trim)
	}
	if arrow.TypeEqual(vt, want) {
		return dtype, largeOffsets(t), nil
	}
	if n := narrowed(vt); n != 0 && n.Size() < dtype.Size() && narrowed(want) != 0 {
		return n, largeOffsets(t), nil
	}
	return 0, false, fmt.Errorf("values of type %v do not carry %v", vt, dtype)
}

// narrowed is the dtype of a signed integer Arrow type, 0 for any other.
func narrowed(t arrow.DataType) column.DType {
	switch t.ID() {
	case arrow.INT8:
		return column.Int8
	case arrow.INT16:
		return column.Int16
	case arrow.INT32:
		return column.Int32
	case arrow.INT64:
		return column.Int64
	}
	return 0
}

// Add appends rec's rows.
func (a *Assembler) Add(rec arrow.RecordBatch) error {
	rows := int(rec.NumRows())
	if a.MaxRows > 0 && (rows > a.MaxRows || a.out.Rows > a.MaxRows-rows) {
		return fmt.Errorf("%d rows and more, from a unit of %d rows", a.out.Rows+rows, a.MaxRows)
	}
	for i, m := range a.cols {
		c := &a.out.Columns[i]
		if err := a.appendArray(c, m, rec.Column(m.field), rows); err != nil {
			return fmt.Errorf("column %q: %w", c.Name, err)
		}
		if m.valid >= 0 && rows > 0 {
			vb := rec.Column(m.valid).Data().Buffers()
			if len(vb) < 2 || vb[1] == nil || vb[1].Len() < rows {
				return fmt.Errorf("column %q: short validity", c.Name)
			}
			c.Valid = append(c.Valid, vb[1].Bytes()[:rows]...)
		}
		c.Len += rows
	}
	a.out.Rows += rows
	return nil
}

// appendArray appends an array's rows to c, checking them against c's
// layout.
func (a *Assembler) appendArray(c *column.Column, m colMap, arr arrow.Array, rows int) error {
	d := arr.Data()
	if d.Len() != rows || d.Offset() != 0 {
		return fmt.Errorf("array of %d rows at offset %d in a record of %d", d.Len(), d.Offset(), rows)
	}
	es := m.elem.Size()
	if c.Kind == column.Fixed && m.trim == trimNone {
		vd := d
		if c.Width > 1 {
			if len(d.Children()) != 1 {
				return errors.New("fixed-size list without values")
			}
			vd = d.Children()[0]
		}
		n := rows * c.Width
		if len(vd.Buffers()) < 2 || vd.Buffers()[1] == nil && n > 0 || vd.Buffers()[1] != nil && vd.Buffers()[1].Len() < n*es {
			return errors.New("short values")
		}
		if n > 0 {
			appendValues(c, vd.Buffers()[1].Bytes()[:n*es], m.elem, n)
		}
		return nil
	}
	offs, err := a.offsets(d, rows, m.wide)
	if err != nil {
		return err
	}
	var vals []byte
	if c.Kind == column.Bytes {
		if len(d.Buffers()) > 2 && d.Buffers()[2] != nil {
			vals = d.Buffers()[2].Bytes()
		}
	} else if len(d.Children()) == 1 && len(d.Children()[0].Buffers()) > 1 && d.Children()[0].Buffers()[1] != nil {
		vals = d.Children()[0].Buffers()[1].Bytes()
	}
	if offs[0] < 0 || offs[rows] > int64(len(vals)/es) {
		return fmt.Errorf("offsets reach element %d of %d", offs[rows], len(vals)/es)
	}
	if c.Kind == column.Fixed {
		return expandRows(c, vals, m.elem, offs, m.trim == trimHead)
	}
	base := c.Offsets[len(c.Offsets)-1]
	for j := 1; j <= rows; j++ {
		c.Offsets = append(c.Offsets, base+offs[j]-offs[0])
	}
	appendValues(c, vals[offs[0]*int64(es):offs[rows]*int64(es)], m.elem, int(offs[rows]-offs[0]))
	return nil
}

// offsets returns the rows+1 offsets of d, int64 or int32 on the wire,
// as int64, checking that they never decrease.
func (a *Assembler) offsets(d arrow.ArrayData, rows int, wide bool) ([]int64, error) {
	size := 4
	if wide {
		size = 8
	}
	if len(d.Buffers()) < 2 || d.Buffers()[1] == nil || d.Buffers()[1].Len() < size*(rows+1) {
		return nil, errors.New("short offsets")
	}
	var offs []int64
	if wide {
		offs = bytesInt64(d.Buffers()[1].Bytes())[:rows+1]
	} else {
		a.tmp = a.tmp[:0]
		for _, v := range asSlice[int32](d.Buffers()[1].Bytes())[:rows+1] {
			a.tmp = append(a.tmp, int64(v))
		}
		offs = a.tmp
	}
	for j := 1; j <= rows; j++ {
		if offs[j] < offs[j-1] {
			return nil, fmt.Errorf("offsets decrease at row %d", j)
		}
	}
	return offs, nil
}

// appendValues appends n values of dtype elem in src to c, sign-extending
// them to c's dtype if elem is narrower.
func appendValues(c *column.Column, src []byte, elem column.DType, n int) {
	if elem == c.DType {
		c.Data = append(c.Data, src...)
		return
	}
	at := len(c.Data)
	c.Data = slices.Grow(c.Data, n*c.DType.Size())[:at+n*c.DType.Size()]
	convert(c.Data[at:], c.DType, src, elem)
}

// expandRows appends the rows of a trimmed fixed column: row j's elements
// are vals[offs[j]:offs[j+1]] (of dtype elem), at the start of the row, or
// at its end if head, and the rest of the row is zero.
func expandRows(c *column.Column, vals []byte, elem column.DType, offs []int64, head bool) error {
	rows, size, es := len(offs)-1, c.DType.Size(), elem.Size()
	rowBytes := c.Width * size
	start := len(c.Data)
	c.Data = slices.Grow(c.Data, rows*rowBytes)[:start+rows*rowBytes]
	for j := range rows {
		k := int(offs[j+1] - offs[j])
		if k > c.Width {
			return fmt.Errorf("row %d holds %d elements, more than its width %d", j, k, c.Width)
		}
		row := c.Data[start+j*rowBytes : start+(j+1)*rowBytes]
		at := 0
		if head {
			at = (c.Width - k) * size
		}
		convert(row[at:at+k*size], c.DType, vals[int(offs[j])*es:int(offs[j+1])*es], elem)
		clear(row[:at])
		clear(row[at+k*size:])
	}
	return nil
}

// Checksum is the XXH64 of a batch's bytes, column by column: name, kind,
// dtype, width, data, offsets and validity, each length-prefixed.
func Checksum(b *column.Batch) uint64 {
	h := xxhash.New()
	var n [8]byte
	put := func(p []byte) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	binary.LittleEndian.PutUint64(n[:], uint64(b.Rows))
	h.Write(n[:])
	for i := range b.Columns {
		c := &b.Columns[i]
		put([]byte(c.Name))
		put([]byte{byte(c.Kind), byte(c.DType), byte(c.Width), byte(c.Width >> 8), byte(c.Width >> 16)})
		// The column's rows only: a reused batch may hold more beyond them.
		put(c.Data[:min(len(c.Data), dataLen(c))])
		put(int64Bytes(c.Offsets[:min(len(c.Offsets), c.Len+1)]))
		if c.Valid == nil {
			put([]byte("nil"))
		} else {
			put(c.Valid[:min(len(c.Valid), c.Len)])
		}
	}
	return h.Sum64()
}

func dataLen(c *column.Column) int { return c.Values() * c.DType.Size() }
