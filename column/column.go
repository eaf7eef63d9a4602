// Package column owns lastmile's in-memory columnar batch: the form decoded
// Parquet takes between the decode pool, the row-local ops and the ring
// packer.
//
// A Column keeps its values in a []byte so that packing it into a ring slot
// is one memcpy; typed views (Int64s, Float32s, ...) reinterpret that memory
// without copying. Buffers are owned by the Batch and may be reused after
// Reset, so a view must not outlive the next Reset.
//
// This is a leaf package: it must never import another lastmile package.
package column

import (
	"fmt"
	"unsafe"
)

// DType is an element type. The numeric codes are the ring format's dtype
// codes (docs/ring-format.md, section 4), so a column's dtype goes into a
// ring tensor table unchanged.
type DType uint8

// Element types.
const (
	Invalid  DType = 0
	Bool     DType = 1
	Uint8    DType = 2
	Int8     DType = 3
	Int16    DType = 4
	Int32    DType = 5
	Int64    DType = 6
	Float16  DType = 7
	BFloat16 DType = 8
	Float32  DType = 9
	Float64  DType = 10
)

var dtypeInfo = [...]struct {
	name string
	size int
}{
	Invalid:  {"invalid", 0},
	Bool:     {"bool", 1},
	Uint8:    {"uint8", 1},
	Int8:     {"int8", 1},
	Int16:    {"int16", 2},
	Int32:    {"int32", 4},
	Int64:    {"int64", 8},
	Float16:  {"float16", 2},
	BFloat16: {"bfloat16", 2},
	Float32:  {"float32", 4},
	Float64:  {"float64", 8},
}

// Size returns the width of one element in bytes, 0 for Invalid.
func (d DType) Size() int {
	if int(d) >= len(dtypeInfo) {
		return 0
	}
	return dtypeInfo[d].size
}

func (d DType) String() string {
	if int(d) >= len(dtypeInfo) {
		return fmt.Sprintf("dtype(%d)", uint8(d))
	}
	return dtypeInfo[d].name
}

// ParseDType maps a dtype name ("int64", "float32", ...) to its DType.
func ParseDType(s string) (DType, error) {
	for i, info := range dtypeInfo {
		if i != 0 && info.name == s {
			return DType(i), nil
		}
	}
	return Invalid, fmt.Errorf("unknown dtype %q (want one of bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)", s)
}

// Kind says how a column lays out its rows.
type Kind uint8

const (
	// Fixed columns hold Len*Width elements of DType contiguously in Data:
	// a [Len] tensor when Width is 1, [Len, Width] otherwise.
	Fixed Kind = iota
	// List columns hold variable-length rows: the values of all rows
	// back to back in Data, and Len+1 Offsets (in elements) delimiting them.
	List
	// Bytes columns are List columns of uint8 that carry text or binary
	// (Parquet BYTE_ARRAY): Offsets are in bytes.
	Bytes
)

func (k Kind) String() string {
	switch k {
	case Fixed:
		return "fixed"
	case List:
		return "list"
	case Bytes:
		return "bytes"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Column is one column of a batch.
type Column struct {
	Name  string
	Kind  Kind
	DType DType // element type of Data (Uint8 for Bytes)
	Width int   // Fixed only: elements per row (1 for a scalar column)
	Len   int   // rows

	// Data holds the values. Fixed: Len*Width elements. List and Bytes: all
	// rows' values, Offsets[Len] elements.
	Data []byte
	// Offsets delimit rows of List and Bytes columns: Len+1 entries,
	// Offsets[0] == 0, non-decreasing. Nil for Fixed.
	Offsets []int64
	// Valid is nil when every row is valid; otherwise Len bytes, 1 for a
	// valid row and 0 for a null one. Null rows of a Fixed column hold zeros
	// in Data; null rows of a List or Bytes column are empty.
	Valid []byte
}

// NullCount returns the number of null rows.
func (c *Column) NullCount() int {
	if c.Valid == nil {
		return 0
	}
	n := 0
	for _, v := range c.Valid[:c.Len] {
		if v == 0 {
			n++
		}
	}
	return n
}

// Values returns the number of elements in Data.
func (c *Column) Values() int {
	if c.Kind == Fixed {
		return c.Len * c.Width
	}
	if len(c.Offsets) == 0 {
		return 0
	}
	return int(c.Offsets[c.Len])
}

// Check verifies the column's internal invariants and returns an error
// naming the first one broken. It is meant for tests and for data that
// crossed a process boundary, not for the hot path.
func (c *Column) Check() error {
	size := c.DType.Size()
	if size == 0 {
		return fmt.Errorf("column %q: invalid dtype %v", c.Name, c.DType)
	}
	switch c.Kind {
	case Fixed:
		if c.Width < 1 {
			return fmt.Errorf("column %q: width %d < 1", c.Name, c.Width)
		}
		if want := c.Len * c.Width * size; len(c.Data) != want {
			return fmt.Errorf("column %q: %d data bytes, want %d", c.Name, len(c.Data), want)
		}
	case List, Bytes:
		if len(c.Offsets) != c.Len+1 {
			return fmt.Errorf("column %q: %d offsets for %d rows", c.Name, len(c.Offsets), c.Len)
		}
		if c.Offsets[0] != 0 {
			return fmt.Errorf("column %q: offsets[0] = %d", c.Name, c.Offsets[0])
		}
		for i := 1; i <= c.Len; i++ {
			if c.Offsets[i] < c.Offsets[i-1] {
				return fmt.Errorf("column %q: offsets decrease at row %d", c.Name, i)
			}
		}
		if want := int(c.Offsets[c.Len]) * size; len(c.Data) != want {
			return fmt.Errorf("column %q: %d data bytes, offsets say %d", c.Name, len(c.Data), want)
		}
	default:
		return fmt.Errorf("column %q: unknown kind %v", c.Name, c.Kind)
	}
	if c.Valid != nil && len(c.Valid) != c.Len {
		return fmt.Errorf("column %q: %d validity bytes for %d rows", c.Name, len(c.Valid), c.Len)
	}
	return nil
}

// Typed views. They panic if the dtype does not match: a mismatch is a bug
// in the caller, not bad input.

func view[T any](c *Column, want DType) []T {
	if c.DType != want {
		panic(fmt.Sprintf("BUG: column %q is %v, viewed as %v", c.Name, c.DType, want))
	}
	var zero T
	n := len(c.Data) / int(unsafe.Sizeof(zero))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(c.Data))), n)
}

func (c *Column) Int64s() []int64     { return view[int64](c, Int64) }
func (c *Column) Int32s() []int32     { return view[int32](c, Int32) }
func (c *Column) Int16s() []int16     { return view[int16](c, Int16) }
func (c *Column) Int8s() []int8       { return view[int8](c, Int8) }
func (c *Column) Uint8s() []uint8     { return view[uint8](c, Uint8) }
func (c *Column) Float32s() []float32 { return view[float32](c, Float32) }
func (c *Column) Float64s() []float64 { return view[float64](c, Float64) }

// Row returns row i's values of a List or Bytes column as raw bytes.
func (c *Column) Row(i int) []byte {
	size := int64(c.DType.Size())
	return c.Data[c.Offsets[i]*size : c.Offsets[i+1]*size]
}

// Grow returns b resized to n bytes, reusing its storage when it is large
// enough. The contents are not preserved beyond the old length.
func Grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	// Round up so that slowly growing columns settle after a few batches.
	c := n + n/8
	if c < 64 {
		c = 64
	}
	return make([]byte, n, c)
}

// Batch is a set of equally long columns.
type Batch struct {
	Rows    int
	Columns []Column
}

// Col returns the column with the given name, or nil.
func (b *Batch) Col(name string) *Column {
	for i := range b.Columns {
		if b.Columns[i].Name == name {
			return &b.Columns[i]
		}
	}
	return nil
}

// Bytes returns the payload bytes the batch holds (data, offsets and
// validity), the size it takes in a ring slot before alignment.
func (b *Batch) Bytes() int {
	n := 0
	for i := range b.Columns {
		c := &b.Columns[i]
		n += len(c.Data) + 8*len(c.Offsets) + len(c.Valid)
	}
	return n
}

// Check verifies every column and that all have Rows rows.
func (b *Batch) Check() error {
	for i := range b.Columns {
		c := &b.Columns[i]
		if c.Len != b.Rows {
			return fmt.Errorf("column %q has %d rows, batch has %d", c.Name, c.Len, b.Rows)
		}
		if err := c.Check(); err != nil {
			return err
		}
	}
	return nil
}

// AppendRows appends rows [lo, hi) of src to b, which must have the same
// columns (names, kinds, dtypes and widths) or none yet. It reuses b's
// buffers; a batch used as a carry between units settles after a few calls.
// A batch of rows without columns (a pipeline that selects none) counts
// its rows like any other.
func (b *Batch) AppendRows(src *Batch, lo, hi int) {
	if len(b.Columns) == 0 && b.Rows == 0 {
		b.Columns = make([]Column, len(src.Columns))
		b.Rows = 0
	}
	if len(b.Columns) != len(src.Columns) {
		panic(fmt.Sprintf("BUG: append %d columns to a batch of %d", len(src.Columns), len(b.Columns)))
	}
	for i := range src.Columns {
		b.Columns[i].appendRows(&src.Columns[i], b.Rows, lo, hi)
	}
	b.Rows += hi - lo
}

func (c *Column) appendRows(src *Column, rows, lo, hi int) {
	if rows == 0 {
		c.Name, c.Kind, c.DType, c.Width = src.Name, src.Kind, src.DType, src.Width
		c.Data, c.Offsets, c.Len = c.Data[:0], c.Offsets[:0], 0
		if c.Valid != nil {
			c.Valid = c.Valid[:0]
		}
	}
	size := src.DType.Size()
	n := hi - lo
	switch src.Kind {
	case Fixed:
		w := size * src.Width
		c.Data = append(c.Data, src.Data[lo*w:hi*w]...)
	default:
		if len(c.Offsets) == 0 {
			c.Offsets = append(c.Offsets, 0)
		}
		base := c.Offsets[len(c.Offsets)-1] - src.Offsets[lo]
		for _, o := range src.Offsets[lo+1 : hi+1] {
			c.Offsets = append(c.Offsets, o+base)
		}
		c.Data = append(c.Data, src.Data[src.Offsets[lo]*int64(size):src.Offsets[hi]*int64(size)]...)
	}
	switch {
	case src.Valid != nil:
		if c.Valid == nil {
			c.Valid = make([]byte, rows, rows+n)
			for i := range c.Valid {
				c.Valid[i] = 1
			}
		}
		c.Valid = append(c.Valid, src.Valid[lo:hi]...)
	case c.Valid != nil:
		for range n {
			c.Valid = append(c.Valid, 1)
		}
	}
	c.Len = rows + n
}

// Reset empties the batch, keeping its buffers for reuse.
func (b *Batch) Reset() {
	b.Rows = 0
	for i := range b.Columns {
		c := &b.Columns[i]
		c.Len, c.Data, c.Offsets = 0, c.Data[:0], c.Offsets[:0]
		c.Valid = nil
	}
}

// Gather sets b to the rows idx of src, in that order, reusing b's
// buffers. Every index must be in [0, src.Rows).
func (b *Batch) Gather(src *Batch, idx []int32) {
	if len(b.Columns) != len(src.Columns) {
		b.Columns = make([]Column, len(src.Columns))
	}
	for i := range src.Columns {
		b.Columns[i].gather(&src.Columns[i], idx)
	}
	b.Rows = len(idx)
}

func (c *Column) gather(src *Column, idx []int32) {
	c.Name, c.Kind, c.DType, c.Width, c.Len = src.Name, src.Kind, src.DType, src.Width, len(idx)
	size := src.DType.Size()
	switch src.Kind {
	case Fixed:
		w := size * src.Width
		c.Data = Grow(c.Data, len(idx)*w)
		switch w {
		case 8:
			d := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(c.Data))), len(idx))
			s := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(src.Data))), src.Len)
			for j, r := range idx {
				d[j] = s[r]
			}
		case 4:
			d := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(c.Data))), len(idx))
			s := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(src.Data))), src.Len)
			for j, r := range idx {
				d[j] = s[r]
			}
		default:
			for j, r := range idx {
				copy(c.Data[j*w:(j+1)*w], src.Data[int(r)*w:int(r+1)*w])
			}
		}
	default:
		c.sizeOffsets(len(idx))
		var n int64
		for j, r := range idx {
			n += src.Offsets[r+1] - src.Offsets[r]
			c.Offsets[j+1] = n
		}
		c.Data = Grow(c.Data, int(n)*size)
		for j, r := range idx {
			copy(c.Data[c.Offsets[j]*int64(size):], src.Data[src.Offsets[r]*int64(size):src.Offsets[r+1]*int64(size)])
		}
	}
	if src.Valid == nil {
		c.Valid = nil
		return
	}
	c.Valid = Grow(c.Valid, len(idx))
	for j, r := range idx {
		c.Valid[j] = src.Valid[r]
	}
}
