package decode

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

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
	// maxInt96Days bounds |days since 1970| so that days*nanosPerDay
	// cannot overflow; a nanosecond-of-day then overflows only at the
	// range's very edge, which the sum checks.
	maxInt96Days = math.MaxInt64 / nanosPerDay
)

// isInt96 reports whether the field's values are stored as INT96.
func (f *Field) isInt96() bool { return f.Physical == int32(format.Int96) }

// int96Nanos converts the n 12-byte INT96 values of src into n int64
// nanoseconds at dst (8n bytes). src must hold 12n bytes.
func int96Nanos(dst, src []byte, n int) error {
	for i := range n {
		v := src[i*int96Size : (i+1)*int96Size]
		ns, err := int96Value(int64(binary.LittleEndian.Uint64(v)), int32(binary.LittleEndian.Uint32(v[8:])))
		if err != nil {
			return err
		}
		binary.LittleEndian.PutUint64(dst[i*8:], uint64(ns))
	}
	return nil
}

// int96Value is the instant of Julian day jd plus nod nanoseconds, in
// nanoseconds since the Unix epoch.
func int96Value(nod int64, jd int32) (int64, error) {
	days := int64(jd) - julianUnixEpoch
	if days < -maxInt96Days || days > maxInt96Days {
		return 0, int96RangeError(jd)
	}
	base := days * nanosPerDay
	if nod > 0 && base > math.MaxInt64-nod || nod < 0 && base < math.MinInt64-nod {
		return 0, int96RangeError(jd)
	}
	return base + nod, nil
}

func int96RangeError(jd int32) error {
	return fmt.Errorf("%w: INT96 timestamp on %s (Julian day %d) is outside what int64 nanoseconds since 1970 hold "+
		"(1677-09-22 to 2262-04-10); drop or rewrite such rows where the table is written, or store the column as INT64 TIMESTAMP",
		ErrUnsupported, julianDate(jd), jd)
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
