package decode

import (
	"encoding/binary"
	"math"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/format"
)

// Row-group statistics. A footer gives each column chunk's minimum and
// maximum value and its null count; a job's filters use them to skip a
// row group none of whose rows can pass, without reading it (the engine
// asks ops.Program.Prune). Only what is sure to bound the values as they
// decode is passed on:
//
//   - INT32 and INT64 columns (dates, timestamps and other signed
//     integers), from min_value/max_value or, when absent, the older
//     min/max, whose order is the signed one for these types;
//   - strings, from min_value/max_value only: the older fields compared
//     bytes as signed, and writers that truncate a long maximum round it
//     up;
//   - FLOAT and DOUBLE, from min_value/max_value only (the fields whose
//     order the format defines for floats: NaNs left out, a zero bound
//     standing for either sign). A NaN bound is no bound; NaN rows may be
//     in any row group, and the filters' pruning assumes so for every
//     float column (expr.Range);
//   - not converted types (INT96, DECIMAL and UINT_32 bound their stored
//     form), booleans or lists (their statistics are of elements).
//
// A null count read from a footer cannot be told from an absent one, so
// it is known only for required columns (0).

// Bounds are one column's statistics over a row group. A slice of the
// row group (MaxUnitRows) carries its row group's: still bounds.
type Bounds struct {
	// Known says MinInt and MaxInt (Int), MinFloat and MaxFloat
	// (Float) or MinString and MaxString bound the column's non-null
	// values (its non-NaN values, for floats).
	Known, Int, Float    bool
	MinInt, MaxInt       int64
	MinFloat, MaxFloat   float64
	MinString, MaxString string
	// Nulls is the number of null values, -1 when not known.
	Nulls int64
}

// groupBounds returns the statistics of fields in row group g.
func groupBounds(g *format.RowGroup, fields []Field) []Bounds {
	out := make([]Bounds, len(fields))
	for i := range fields {
		if fields[i].Absent {
			out[i] = Bounds{Nulls: g.NumRows} // every row null, no values
			if fields[i].Default != nil {
				out[i] = Bounds{Nulls: 0} // every row the default
			}
			continue
		}
		f := storedForm(&fields[i]) // the file's statistics are of its own type
		out[i] = chunkBounds(&g.Columns[fields[i].Leaf].MetaData.Statistics, &f)
		if daysOf(&fields[i]) {
			out[i] = dayBounds(out[i], fields[i].TimeUnit)
		}
	}
	return out
}

func chunkBounds(st *format.Statistics, f *Field) Bounds {
	b := Bounds{Nulls: -1}
	if !f.Nullable {
		b.Nulls = 0
	}
	if f.Kind == column.List || f.converts() {
		return b
	}
	b.values(f, st.MinValue, st.MaxValue, st.Min, st.Max)
	return b
}

// values sets b's bounds from a minimum and maximum as the format stores
// them (lo, hi), or, for INT32 and INT64, the older fields (oldLo,
// oldHi) when those are absent.
func (b *Bounds) values(f *Field, lo, hi, oldLo, oldHi []byte) {
	switch {
	case f.Kind == column.Bytes:
		if hi != nil && len(hi) > 0 {
			b.Known, b.MinString, b.MaxString = true, string(lo), string(hi)
		}
	case f.DType == column.Int32 && format.Type(f.Physical) == format.Int32:
		if len(lo) != 4 || len(hi) != 4 {
			lo, hi = oldLo, oldHi
		}
		if len(lo) == 4 && len(hi) == 4 {
			b.Known, b.Int = true, true
			b.MinInt, b.MaxInt = int64(int32(binary.LittleEndian.Uint32(lo))), int64(int32(binary.LittleEndian.Uint32(hi)))
		}
	case f.DType == column.Int64 && format.Type(f.Physical) == format.Int64:
		if len(lo) != 8 || len(hi) != 8 {
			lo, hi = oldLo, oldHi
		}
		if len(lo) == 8 && len(hi) == 8 {
			b.Known, b.Int = true, true
			b.MinInt, b.MaxInt = int64(binary.LittleEndian.Uint64(lo)), int64(binary.LittleEndian.Uint64(hi))
		}
	case f.DType == column.Float32 && format.Type(f.Physical) == format.Float:
		if len(lo) == 4 && len(hi) == 4 {
			b.floats(float64(math.Float32frombits(binary.LittleEndian.Uint32(lo))), float64(math.Float32frombits(binary.LittleEndian.Uint32(hi))))
		}
	case f.DType == column.Float64 && format.Type(f.Physical) == format.Double:
		if len(lo) == 8 && len(hi) == 8 {
			b.floats(math.Float64frombits(binary.LittleEndian.Uint64(lo)), math.Float64frombits(binary.LittleEndian.Uint64(hi)))
		}
	}
	if b.Known && b.Int && b.MinInt > b.MaxInt {
		b.Known = false // not bounds at all: trust nothing
	}
}

// floats sets float bounds, unless either is NaN or they are out of
// order: not bounds at all.
func (b *Bounds) floats(lo, hi float64) {
	if math.IsNaN(lo) || math.IsNaN(hi) || lo > hi {
		return
	}
	b.Known, b.Float, b.MinFloat, b.MaxFloat = true, true, lo, hi
}
