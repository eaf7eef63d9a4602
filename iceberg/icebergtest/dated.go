package icebergtest

import (
	"fmt"

	ice "github.com/apache/iceberg-go"
	"github.com/parquet-go/parquet-go"
)

// A table with a date column that format v3 lets ALTER TABLE make a
// timestamp (Layout.Dated): day (field id 10) is each row's DayOf until
// PromoteDay, and the files written since store DayStamp, microseconds.

// DayOf is row id's day, in days from 1970: seven rows a day, the first
// ones before 1970.
func DayOf(id int64) int32 { return int32(id/7 - 20) }

// DayStamp is row id's day as the files written after PromoteDay store
// it: an hour of its day, in microseconds.
func DayStamp(id int64) int64 { return int64(DayOf(id))*86400e6 + id%7*3600e6 }

type (
	datedRow struct {
		ID    int64   `parquet:"id,id(1)"`
		Part  string  `parquet:"part,id(2)"`
		Key   int64   `parquet:"key,id(3)"`
		Score float64 `parquet:"score,id(4)"`
		Day   int32   `parquet:"day,id(10),date"`
	}
	stampedRow struct {
		ID    int64   `parquet:"id,id(1)"`
		Part  string  `parquet:"part,id(2)"`
		Key   int64   `parquet:"key,id(3)"`
		Score float64 `parquet:"score,id(4)"`
		Day   int64   `parquet:"day,id(10),timestamp(microsecond)"`
	}
)

// datedField is the column Layout.Dated adds.
var datedField = ice.NestedField{ID: 10, Name: "day", Type: ice.PrimitiveTypes.Date, Required: true}

// checkDated refuses what Layout.Dated is not combined with.
func checkDated(l Layout) error {
	if l.Dated && (l.FloatScore || l.Hive || l.Imported) {
		return fmt.Errorf("Dated with FloatScore, Hive or Imported is not supported")
	}
	return nil
}

// PromoteDay makes day a timestamp (microseconds, no zone) in a new
// current schema, as format v3's ALTER TABLE ALTER COLUMN day TYPE
// timestamp does: the data files written before keep their dates and
// date bounds. It returns the new metadata file's path.
func (t *Table) PromoteDay() (string, error) {
	switch {
	case !t.dated || t.stamped:
		return "", fmt.Errorf("day is not a date")
	case t.version < 3:
		return "", fmt.Errorf("a date made a timestamp needs format version 3, the table is %d", t.version)
	}
	fields := t.schema.Fields()
	for i := range fields {
		if fields[i].ID == datedField.ID {
			fields[i].Type = ice.PrimitiveTypes.Timestamp
		}
	}
	t.newSchema(fields)
	t.stamped = true
	return t.writeMetadata()
}

func (t *Table) writeDated(path string, rows []Row, opts []parquet.WriterOption) error {
	if t.added {
		return fmt.Errorf("Dated with AddColumns is not supported")
	}
	if t.stamped {
		return parquet.WriteFile(path, convertRows(rows, func(r Row) stampedRow {
			return stampedRow{r.ID, r.Part, r.Key, r.Score, DayStamp(r.ID)}
		}), opts...)
	}
	return parquet.WriteFile(path, convertRows(rows, func(r Row) datedRow {
		return datedRow{r.ID, r.Part, r.Key, r.Score, DayOf(r.ID)}
	}), opts...)
}

// dayBounds adds day's bounds, for rows whose ids run from lo to hi, to
// a manifest's: dates before PromoteDay, microseconds after.
func (t *Table) dayBounds(lo, hi map[int][]byte, loID, hiID int64) {
	if !t.dated {
		return
	}
	enc := func(l ice.Literal) []byte {
		b, err := l.MarshalBinary()
		if err != nil {
			panic("BUG: " + err.Error())
		}
		return b
	}
	if t.stamped {
		lo[10], hi[10] = enc(ice.NewLiteral(ice.Timestamp(DayStamp(loID)))), enc(ice.NewLiteral(ice.Timestamp(DayStamp(hiID))))
		return
	}
	lo[10], hi[10] = enc(ice.NewLiteral(ice.Date(DayOf(loID)))), enc(ice.NewLiteral(ice.Date(DayOf(hiID))))
}
