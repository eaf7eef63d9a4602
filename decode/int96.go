package decode

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// INT96 timestamps. Spark (spark.sql.parquet.outputTimestampType's
// default), Hive and Impala store a timestamp as 12 bytes: the
// nanoseconds within the day (int64, little-endian) and then the Julian
// day number (int32, little-endian). Parquet deprecates the type, but
// tables written that way are common, and a timestamp is what a
// time-window filter or a recency weight reads. The decoder turns each
// value into int64 nanoseconds since 1970-01-01 00:00 UTC, as Arrow
// (timestamp[ns]) and Spark read them, with no time-zone adjustment.
//
// In a table that reads the column as its own timestamp (an Iceberg
// table migrated from Hive: its old files hold INT96, the files its
// writers add INT64 microseconds), the value is counted in the table's
// unit instead (Field.TimeUnit, promote.go), rounded down as a time
// before 1970 is: every file of the table then reads alike.
//
// The type's statistics and sort order are undefined, so nothing here
// reads them. A value whose instant int64 nanoseconds cannot hold (before
// 1677-09-22 or after 2262-04-10, the last whole days inside the range)
// is an error naming its date: wrapping around, as some readers do,
// would hand the trainer a wrong time without a word.

const (
	int96Size = 12
	// julianUnixEpoch is the Julian day number of 1970-01-01.
	julianUnixEpoch = 2440588
	nanosPerDay     = 86400 * int64(time.Second)
)

// isInt96 reports whether the field's values are stored as INT96.
func (f *Field) isInt96() bool { return f.Physical == int32(format.Int96) }

// Counts is the nanoseconds one decoded value of f counts where f is a
// timestamp or a date: its TimeUnit, or 1 for an INT96 column read as
// nanoseconds; 0 for any other column. An expression's timestamp() takes it.
func (f *Field) Counts() int64 {
	if f.TimeUnit == 0 && f.isInt96() {
		return 1
	}
	return f.TimeUnit
}

// int96Unit is the nanoseconds one decoded value of an INT96 field
// counts: the table's timestamp unit where it has one, else 1.
func (f *Field) int96Unit() int64 { return max(f.TimeUnit, 1) }

// int96Values converts the n 12-byte INT96 values of src into n int64
// counts of unit nanoseconds since 1970 at dst (8n bytes). src must hold
// 12n bytes; unit is 1, 1,000 or 1,000,000.
func int96Values(dst, src []byte, n int, unit int64) error {
	for i := range n {
		v := src[i*int96Size : (i+1)*int96Size]
		t, err := int96Value(int64(binary.LittleEndian.Uint64(v)), int32(binary.LittleEndian.Uint32(v[8:])), unit)
		if err != nil {
			return err
		}
		binary.LittleEndian.PutUint64(dst[i*8:], uint64(t))
	}
	return nil
}

// int96Value is the instant of Julian day jd plus nod nanoseconds, in
// units of unit nanoseconds since the Unix epoch, rounded down.
func int96Value(nod int64, jd int32, unit int64) (int64, error) {
	perDay := nanosPerDay / unit
	days := int64(jd) - julianUnixEpoch
	if days < -math.MaxInt64/perDay || days > math.MaxInt64/perDay {
		return 0, int96RangeError(jd, unit)
	}
	base, in := days*perDay, nod/unit
	if nod%unit < 0 {
		in-- // rounded down, not toward zero
	}
	if in > 0 && base > math.MaxInt64-in || in < 0 && base < math.MinInt64-in {
		return 0, int96RangeError(jd, unit)
	}
	return base + in, nil
}

func int96RangeError(jd int32, unit int64) error {
	span := " (1677-09-22 to 2262-04-10)"
	if unit != 1 {
		span = ""
	}
	return fmt.Errorf("%w: INT96 timestamp on %s (Julian day %d) is outside what int64 %s since 1970 hold%s; "+
		"drop or rewrite such rows where the table is written, or store the column as INT64 TIMESTAMP",
		ErrUnsupported, julianDate(jd), jd, unitName(unit), span)
}

// timestampUnit is the nanoseconds a value of el, an INT64 or INT32
// column, counts where it is a timestamp or a date (its logical type,
// or the converted TIMESTAMP_MILLIS, TIMESTAMP_MICROS or DATE), and 0
// otherwise.
func timestampUnit(el *format.SchemaElement) int64 {
	pt, _ := el.Type.Get()
	switch lt := el.LogicalType.Value.(type) {
	case *format.TimestampType:
		if lt.Unit.Value != nil && pt == format.Int64 {
			return int64(lt.Unit.Value.Duration())
		}
	case *format.DateType:
		if pt == format.Int32 {
			return nanosPerDay
		}
	}
	switch ct, _ := el.ConvertedType.Get(); {
	case ct == deprecated.TimestampMillis && pt == format.Int64:
		return int64(time.Millisecond)
	case ct == deprecated.TimestampMicros && pt == format.Int64:
		return int64(time.Microsecond)
	case ct == deprecated.Date && pt == format.Int32:
		return nanosPerDay
	}
	return 0
}

// unitName names a timestamp unit in nanoseconds.
func unitName(unit int64) string {
	if unit == 0 {
		return "no unit (not a timestamp)"
	}
	return column.UnitName(unit)
}

// julianDate formats Julian day jd as a proleptic Gregorian date, for
// errors; years far outside time.Time's range print as a year only.
func julianDate(jd int32) string {
	days := int64(jd) - julianUnixEpoch
	const daysPer400y = 146097
	if days < -1000*daysPer400y || days > 1000*daysPer400y {
		return fmt.Sprintf("about year %d", 1970+days*400/daysPer400y)
	}
	return time.Unix(0, 0).UTC().AddDate(0, 0, int(days)).Format("2006-01-02")
}
