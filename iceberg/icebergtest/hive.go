package icebergtest

import (
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
)

// A table that Iceberg's migrate made of a Hive table (Layout.Hive): the
// Hive files store the event time as Spark and Hive did, INT96, without
// field ids; the files Iceberg's writers add after NativeWrites store it
// as INT64 microseconds, with field ids.

// EventTime is row id's ts: before and after 1970, with parts of a
// microsecond that the INT96 files hold and the native ones round down.
func EventTime(id int64) time.Time {
	return time.Unix(0, -1).Add(time.Duration(id)*(37*time.Minute+1001*time.Nanosecond) - 48*time.Hour)
}

type (
	hiveRow struct {
		ID    int64            `parquet:"id"`
		Part  string           `parquet:"part"`
		Key   int64            `parquet:"key"`
		Score float64          `parquet:"score"`
		TS    deprecated.Int96 `parquet:"ts,dict"`
	}
	nativeRow struct {
		ID    int64   `parquet:"id,id(1)"`
		Part  string  `parquet:"part,id(2)"`
		Key   int64   `parquet:"key,id(3)"`
		Score float64 `parquet:"score,id(4)"`
		TS    int64   `parquet:"ts,id(9),timestamp(microsecond:utc)"`
	}
)

// NativeWrites makes the data files appended from now on the kind
// Iceberg's own writers add to a migrated table: field ids, and ts as
// INT64 microseconds.
func (t *Table) NativeWrites() { t.native = true }

func (t *Table) writeHive(path string, rows []Row, opts []parquet.WriterOption) error {
	if t.native {
		return parquet.WriteFile(path, convertRows(rows, func(r Row) nativeRow {
			return nativeRow{r.ID, r.Part, r.Key, r.Score, EventTime(r.ID).UnixMicro()}
		}), opts...)
	}
	return parquet.WriteFile(path, convertRows(rows, func(r Row) hiveRow {
		return hiveRow{r.ID, r.Part, r.Key, r.Score, int96(EventTime(r.ID))}
	}), opts...)
}

// int96 is at as Hive stores it: nanoseconds of the day, then the Julian
// day.
func int96(at time.Time) deprecated.Int96 {
	ns := at.UnixNano()
	days := ns / int64(24*time.Hour)
	if ns%int64(24*time.Hour) < 0 {
		days--
	}
	nod := uint64(ns - days*int64(24*time.Hour))
	return deprecated.Int96{uint32(nod), uint32(nod >> 32), uint32(days + 2440588)}
}
