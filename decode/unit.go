package decode

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/format"
)

// Unit is one piece of work: rows [RowStart, RowStart+Rows) of one row
// group. It carries the byte ranges of its column chunks, so decoding it
// needs the plan's Fields but no footer read, and the file's size and
// modification time as planned, so a decoder can refuse a changed file
// (ErrFileChanged).
type Unit struct {
	Seq      int    `json:"seq"`       // index in Plan.Units
	File     string `json:"file"`      // path as planned
	FileSize int64  `json:"file_size"` // bytes, as planned
	ModTime  int64  `json:"mod_time"`  // unix nanoseconds, as planned
	RowGroup int    `json:"row_group"` // row group index in the file
	RowStart int64  `json:"row_start"` // first row, counted within the row group
	Rows     int64  `json:"rows"`      // rows in the unit, > 0
	// GroupRowCount is its row group's num_rows as planned (0 in units
	// planned before it was carried: then unchecked). No data page of
	// the unit may run past it (decodePages): a page claiming millions
	// of rows in a few bytes of RLE is refused before it is decoded.
	GroupRowCount int64   `json:"group_rows,omitempty"`
	Ordinal       int64   `json:"ordinal"` // plan-wide index of the unit's first row
	Chunks        []Chunk `json:"chunks"`  // one per plan field, in field order
	// Partition holds the values of the plan's partition columns, as
	// the file's path gives them (partition.go).
	Partition []string `json:"partition,omitempty"`
	// Deleted are the unit's rows (0 to Rows-1, increasing) that the
	// table deletes: an Iceberg snapshot's position deletes, which the
	// engine sets after planning. Whoever computes the unit drops them.
	Deleted []int32 `json:"deleted,omitempty"`
	// Bounds are the row group's column statistics, one per plan field
	// (bounds.go); planning fills them, and they do not travel with the
	// unit.
	Bounds []Bounds `json:"-"`
}

// GroupRows is the row count of u's row group as its chunks tell it: a
// flat (not list) chunk's level count is one per row. It is 0 when every
// field is a list.
func (u *Unit) GroupRows(fields []Field) int64 {
	for i := range fields {
		if fields[i].Kind != column.List && i < len(u.Chunks) {
			return u.Chunks[i].Values
		}
	}
	return 0
}

// Chunk locates one field's pages for a unit.
type Chunk struct {
	Leaf  int   `json:"leaf"`  // leaf column index in this file
	Codec int32 `json:"codec"` // parquet CompressionCodec
	// DictOffset and DictLen locate a dictionary page read before the
	// pages at Offset; DictLen is 0 when Offset already starts at it.
	DictOffset int64 `json:"dict_offset,omitempty"`
	DictLen    int64 `json:"dict_len,omitempty"`
	// Offset and End delimit the pages to read: the whole chunk, or the
	// pages covering the unit's rows when the OffsetIndex told them.
	Offset int64 `json:"offset"`
	End    int64 `json:"end"`
	// FirstRow is the row (within the row group) the page at Offset
	// starts with.
	FirstRow int64 `json:"first_row"`
	// Values and Uncompressed are the whole chunk's level count and
	// uncompressed size: sizing hints.
	Values       int64 `json:"values"`
	Uncompressed int64 `json:"uncompressed"`
	// Index and IndexLen locate the chunk's OffsetIndex (the page
	// index), 0 when it has none: a selection reads only the pages
	// holding selected rows (pageindex.go).
	Index    int64 `json:"index,omitempty"`
	IndexLen int32 `json:"index_len,omitempty"`
	// ColIndex and ColIndexLen locate the chunk's ColumnIndex (each
	// page's minimum and maximum), 0 when it has none: a filter may rule
	// out pages by it (colindex.go).
	ColIndex    int64 `json:"col_index,omitempty"`
	ColIndexLen int32 `json:"col_index_len,omitempty"`
	// Absent marks a column the file does not have (Field.Absent): Leaf
	// is -1, nothing is read, and every row decodes null. Values is the
	// row group's rows, one null level each.
	Absent bool `json:"absent,omitempty"`
	// Physical and TypeLen, when Physical is not 0, are the type the
	// file stores the column in, narrower than its field's: the table
	// promoted it since (Field.StoredPhysical, promote.go).
	Physical int32 `json:"physical,omitempty"`
	TypeLen  int32 `json:"type_len,omitempty"`
	// Default, for an absent chunk, is the value its rows read in place
	// of null (Field.Default). Not omitted when empty: an empty string
	// is a default ("", not null), and travels as one.
	Default []byte `json:"default"`
}

// maxIndexBytes bounds an OffsetIndex the decoder reads (about 20 bytes a
// page): a corrupt unit or footer cannot make it allocate without limit.
const maxIndexBytes = 16 << 20

// unitVersion is the first byte of a marshaled Unit; the JSON follows.
const unitVersion = 1

// MarshalBinary encodes u as a version byte followed by JSON.
func (u Unit) MarshalBinary() ([]byte, error) {
	b, err := json.Marshal(u)
	if err != nil {
		return nil, err
	}
	return append([]byte{unitVersion}, b...), nil
}

// UnmarshalBinary decodes what MarshalBinary wrote and validates it.
func (u *Unit) UnmarshalBinary(b []byte) error {
	if len(b) == 0 {
		return errors.New("unmarshal unit: empty")
	}
	if b[0] != unitVersion {
		return fmt.Errorf("unmarshal unit: version %d, want %d", b[0], unitVersion)
	}
	var v Unit
	if err := json.Unmarshal(b[1:], &v); err != nil {
		return fmt.Errorf("unmarshal unit: %w", err)
	}
	if err := v.validate(); err != nil {
		return fmt.Errorf("unmarshal unit: %w", err)
	}
	*u = v
	return nil
}

func (u *Unit) validate() error {
	if u.File == "" || u.FileSize < 12 || u.RowGroup < 0 || u.RowStart < 0 || u.Rows <= 0 ||
		u.Ordinal < 0 || u.RowStart > 1<<62 || u.Rows > 1<<40 || u.GroupRowCount < 0 ||
		(u.GroupRowCount > 0 && u.RowStart+u.Rows > u.GroupRowCount) {
		return errors.New("invalid file, size or row range")
	}
	for i := range u.Chunks {
		c := &u.Chunks[i]
		if c.Absent {
			if c.Leaf != -1 || c.Values < 0 || len(c.Default) > maxDefault ||
				!reflect.DeepEqual(*c, Chunk{Leaf: -1, Absent: true, Values: c.Values, Default: c.Default}) {
				return fmt.Errorf("invalid absent chunk %d", i)
			}
			continue
		}
		if c.Default != nil {
			return fmt.Errorf("invalid chunk %d: a default for a column the file has", i)
		}
		if !storableAs(c.Physical, c.TypeLen) {
			return fmt.Errorf("invalid chunk %d: stored type %d (length %d)", i, c.Physical, c.TypeLen)
		}
		if c.Leaf < 0 || !codecSupported(c.Codec) || c.Offset < 4 || c.End < c.Offset || c.End > u.FileSize ||
			c.DictLen < 0 || c.DictOffset < 0 || c.DictOffset+c.DictLen > u.FileSize || c.FirstRow < 0 ||
			c.FirstRow > u.RowStart || c.Values < 0 || c.Uncompressed < 0 ||
			c.Index < 0 || c.IndexLen < 0 || c.Index+int64(c.IndexLen) > u.FileSize || (c.IndexLen > 0 && c.Index < 4) || c.IndexLen > maxIndexBytes {
			return fmt.Errorf("invalid chunk %d", i)
		}
	}
	for i, r := range u.Deleted {
		if r < 0 || int64(r) >= u.Rows || (i > 0 && r <= u.Deleted[i-1]) {
			return fmt.Errorf("deleted row %d at %d: want increasing rows of the unit's %d", r, i, u.Rows)
		}
	}
	if len(u.Partition) > maxPartitions {
		return fmt.Errorf("%d partition values (at most %d)", len(u.Partition), maxPartitions)
	}
	for i, v := range u.Partition {
		if len(v) > MaxPartitionValue {
			return fmt.Errorf("partition value %d: %d bytes (at most %d)", i, len(v), MaxPartitionValue)
		}
	}
	return nil
}

// maxDefault bounds an absent chunk's default value.
const maxDefault = 1 << 16

// storableAs reports whether a chunk may say it stores its column as
// physical type p of length n: none (0), or a type a promoted column has
// (promote.go).
func storableAs(p, n int32) bool {
	switch format.Type(p) {
	case 0:
		return p == 0 && n == 0
	case format.Int32, format.Int64, format.Float, format.Int96:
		return n == 0
	case format.FixedLenByteArray:
		return n >= 1 && n <= 16
	}
	return false
}

// maxPartitions bounds a unit's partition values: more directory levels
// than any table has.
const maxPartitions = 64
