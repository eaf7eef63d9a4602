package decode

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/format"
)

// Promoted columns. An Iceberg table may widen a column's type after
// files were written: int to long, float to double, a decimal's
// precision (its scale stays). A file written before holds the narrower
// form, and reads as the table's: the planner gives such a file's field
// the table's type (Physical, TypeLen, DType) and keeps the file's in
// StoredPhysical and StoredTypeLen, which its units' chunks carry
// (Chunk.Physical, Chunk.TypeLen). So fields agree across a table's
// files, and the decoder, which decodes every unit with the plan's
// fields, views a field as its chunk stores it (promotedView) for that
// unit: an INT32 or FLOAT column is decoded as stored, by the common
// paths of every encoding, and widened (convertStored); a decimal is
// converted from whichever integer or fixed width its file has.

// promote returns f, the field a file resolves, with the table's type tf
// where the table has promoted it since the file was written, and f
// itself otherwise.
func promote(f, tf Field) Field {
	fp, tp := format.Type(f.Physical), format.Type(tf.Physical)
	switch {
	case f.Kind != tf.Kind || f.Hash > 0 || f.Unsigned || tf.Unsigned:
		return f
	case f.Decimal && tf.Decimal && f.Scale == tf.Scale && (fp != tp || f.TypeLen != tf.TypeLen):
	case fp == format.Int96 && tp == format.Int64 && tf.TimeUnit > 0:
		// A Hive file's INT96 in a table whose timestamps are INT64
		// (Iceberg's migrate): read in the table's unit (int96.go).
		f.TimeUnit = tf.TimeUnit
	case fp == format.Int32 && f.TimeUnit == nanosPerDay && tp == format.Int64 && tf.TimeUnit > 0 && tf.TimeUnit < nanosPerDay:
		// Format v3's date to timestamp (or timestamp_ns): the file's
		// days read as the table's unit, each day's first instant
		// (widen), not as an int widened to a long.
		f.TimeUnit = tf.TimeUnit
	case !f.plain || !tf.plain:
		// Other dates, times and timestamps: no promotion gives them,
		// the files disagree, and the planner says so.
		return f
	case f.DType == column.Int32 && fp == format.Int32 && tf.DType == column.Int64 && tp == format.Int64:
	case f.DType == column.Float32 && fp == format.Float && tf.DType == column.Float64 && tp == format.Double:
	default:
		return f
	}
	f.StoredPhysical, f.StoredTypeLen = f.Physical, f.TypeLen
	f.Physical, f.TypeLen, f.DType = tf.Physical, tf.TypeLen, tf.DType
	return f
}

// tableField is the projected name resolved in the table's own schema
// (TableSchema.Stored), as its writers store it now; false where the
// table does not give it.
func (t *TableSchema) tableField(name string, hash uint64) (Field, bool) {
	if t == nil {
		return Field{}, false
	}
	top := name
	if _, ok := t.IDs[name]; !ok {
		top, _, _ = strings.Cut(name, ".")
	}
	root := t.tableColumn(top, t.IDs[top])
	if root == nil {
		return Field{}, false
	}
	node, st, err := findColumn(root, name)
	if err != nil {
		return Field{}, false
	}
	f, err := resolveField(node, st, hash)
	return f, err == nil
}

// tableFields caches tableField for one planning run, whose files ask it
// for the same columns file after file, in parallel: about 1.5 µs a
// column a file uncached (BenchmarkTableField). The TableSchemas it
// holds must not change while the plan is made.
type tableFields struct {
	m sync.Map // tableKey → tableEntry
}

type tableKey struct {
	t    *TableSchema
	name string
	hash uint64
}

type tableEntry struct {
	f  Field
	ok bool
}

// get is t.tableField(name, hash), cached; a nil cache computes it.
func (c *tableFields) get(t *TableSchema, name string, hash uint64) (Field, bool) {
	if c == nil || t == nil {
		return t.tableField(name, hash)
	}
	k := tableKey{t, name, hash}
	if e, ok := c.m.Load(k); ok {
		return e.(tableEntry).f, e.(tableEntry).ok
	}
	f, ok := t.tableField(name, hash)
	c.m.Store(k, tableEntry{f, ok})
	return f, ok
}

// promotedView is f as chunk c stores it, where c's file has an older,
// narrower type (promote); f itself otherwise.
func promotedView(f *Field, c *Chunk) Field {
	g := *f
	if c.Physical == 0 || (c.Physical == f.Physical && c.TypeLen == f.TypeLen) {
		return g
	}
	g.Physical, g.TypeLen = c.Physical, c.TypeLen
	g.StoredPhysical, g.StoredTypeLen = 0, 0
	g.widened = !f.Decimal && !g.isInt96()
	return g
}

// viewable checks that chunk c's stored type is one that field f, as the
// plan has it, can be read from: its own, or one the table promoted f
// from (promote). A unit from elsewhere (a peer's requester) could pair
// any two, and a view that decodes values wider than its field's dtype
// would overrun the column. rows are the unit's: what an absent chunk's
// default fills.
func viewable(f *Field, c *Chunk, rows int64) error {
	if c.Absent {
		return defaultFits(f, c, rows)
	}
	if c.Physical == 0 || (c.Physical == f.Physical && c.TypeLen == f.TypeLen) {
		return nil
	}
	cp, fp := format.Type(c.Physical), format.Type(f.Physical)
	switch {
	case f.Hash > 0 || f.Unsigned:
	case f.Decimal && f.DType == column.Float64 && (cp == format.Int32 || cp == format.Int64 || cp == format.FixedLenByteArray):
		return nil
	case f.Decimal:
	case cp == format.Int32 && fp == format.Int64 && f.DType == column.Int64 && f.TimeUnit == 0:
		return nil
	case cp == format.Int32 && fp == format.Int64 && f.DType == column.Int64 && f.TimeUnit > 0 && f.TimeUnit < nanosPerDay:
		return nil // days of a date the table made a timestamp
	case cp == format.Float && fp == format.Double && f.DType == column.Float64:
		return nil
	case cp == format.Int96 && fp == format.Int64 && f.DType == column.Int64 && f.TimeUnit > 0:
		return nil
	}
	return fmt.Errorf("%w: column %q stored as %v cannot be read as %v (%v)", ErrBadUnit, f.Name, cp, fp, f.DType)
}

// maxDefaultBytes bounds what an absent chunk's default may make of a
// unit's rows: a requester's 64 KiB string default over a million rows
// would otherwise take 64 GiB of a peer.
const maxDefaultBytes = 1 << 28

// defaultFits checks an absent chunk's default against its field: a
// Fixed value of the field's width, a string of at most maxDefaultBytes
// over the unit's rows, no default for a list.
func defaultFits(f *Field, c *Chunk, rows int64) error {
	n := int64(len(c.Default))
	switch {
	case c.Default == nil:
		return nil
	case f.Kind == column.Fixed && n != int64(f.DType.Size()),
		f.Kind == column.List,
		f.Kind == column.Bytes && rows > 0 && n > maxDefaultBytes/rows:
		return fmt.Errorf("%w: column %q (%v %v): an absent chunk's default of %d bytes over %d rows", ErrBadUnit, f.Name, f.Kind, f.DType, n, rows)
	}
	return nil
}

// storedForm is f as its file stores it, for reading the file's own
// statistics: f itself unless promoted.
func storedForm(f *Field) Field {
	if f.StoredPhysical == 0 {
		return *f
	}
	g := promotedView(f, &Chunk{Physical: f.StoredPhysical, TypeLen: f.StoredTypeLen})
	if g.widened {
		g = g.storedView()
	}
	return g
}

// widen converts n INT32 (or FLOAT) values at src into int64 (float64)
// ones at dst, 8 bytes each. An INT32 of a field counted in a unit of
// time below a day is a date the table made a timestamp: its days become
// the first instant of each, in the field's unit, and a day past what an
// int64 of that unit holds (about 292 years from 1970 in nanoseconds) is
// refused rather than wrapped.
func widen(f *Field, dst, src []byte, n int) error {
	if format.Type(f.Physical) == format.Float {
		for i := range n {
			v := math.Float32frombits(binary.LittleEndian.Uint32(src[i*4:]))
			binary.LittleEndian.PutUint64(dst[i*8:], math.Float64bits(float64(v)))
		}
		return nil
	}
	if f.TimeUnit > 0 && f.TimeUnit < nanosPerDay {
		return daysIn(dst, src, n, f.TimeUnit)
	}
	for i := range n {
		binary.LittleEndian.PutUint64(dst[i*8:], uint64(int64(int32(binary.LittleEndian.Uint32(src[i*4:])))))
	}
	return nil
}

// daysIn converts n INT32 days since 1970 at src into int64 counts of
// unit nanoseconds at dst.
func daysIn(dst, src []byte, n int, unit int64) error {
	per := nanosPerDay / unit
	most := math.MaxInt64 / per
	for i := range n {
		d := int64(int32(binary.LittleEndian.Uint32(src[i*4:])))
		if d > most || d < -most {
			return fmt.Errorf("%w: a date %d days from 1970 is past what a timestamp in %s holds", ErrUnsupported, d, unitName(unit))
		}
		binary.LittleEndian.PutUint64(dst[i*8:], uint64(d*per))
	}
	return nil
}

// widenedInt reports whether f is a long that its file stores as an int
// (promote), not a date.
func widenedInt(f *Field) bool {
	return f.StoredPhysical == int32(format.Int32) && f.TimeUnit == 0
}

// daysOf reports whether f is a timestamp that its file stores as a
// date's days (promote).
func daysOf(f *Field) bool {
	return f.StoredPhysical == int32(format.Int32) && f.Physical == int32(format.Int64) && f.TimeUnit > 0 && f.TimeUnit < nanosPerDay
}

// dayBounds scales bounds b of a date's days (a file's statistics of a
// column the table made a timestamp) to the field's unit, forgetting them
// where they do not fit.
func dayBounds(b Bounds, unit int64) Bounds {
	if !b.Known || !b.Int {
		return b
	}
	per := nanosPerDay / unit
	most := math.MaxInt64 / per
	if b.MinInt < -most || b.MaxInt > most {
		b.Known, b.Int = false, false
		return b
	}
	b.MinInt, b.MaxInt = b.MinInt*per, b.MaxInt*per
	return b
}
