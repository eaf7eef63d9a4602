package decode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// A table migrated from Hive: its old files store the event time as
// INT96 (plain or dictionary-encoded, as Spark writes it), the files its
// own writers add as INT64 microseconds.
type (
	hiveRow struct {
		ID int64            `parquet:"id,id(1)"`
		TS deprecated.Int96 `parquet:"ts,id(2)"`
	}
	hiveRowDict struct {
		ID int64            `parquet:"id,id(1)"`
		TS deprecated.Int96 `parquet:"ts,id(2),dict"`
	}
	icebergTSRow struct {
		ID int64 `parquet:"id,id(1)"`
		TS int64 `parquet:"ts,id(2),timestamp(microsecond:utc)"`
	}
	millisRow struct {
		ID int64 `parquet:"id,id(1)"`
		TS int64 `parquet:"ts,id(2),timestamp(millisecond:utc)"`
	}
	// plainTSRow stores ts microseconds as a plain INT64, as some
	// writers do.
	plainTSRow struct {
		ID int64 `parquet:"id,id(1)"`
		TS int64 `parquet:"ts,id(2)"`
	}
)

// hiveAt is row id's event time: before and after 1970, with parts of a
// microsecond, so that rounding down shows.
func hiveAt(id int64) time.Time {
	return time.Unix(0, -1).Add(time.Duration(id) * (37*time.Minute + 1001*time.Nanosecond)).Add(-2 * 24 * time.Hour)
}

// floorDiv is a / b rounded down.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// tsTable is the table's schema: ts an INT64 timestamp of unit.
func tsTable(unit format.TimeUnitValue) *TableSchema {
	ts := leafElement("ts", 2, format.Required, format.Int64)
	ts.LogicalType.Value = &format.TimestampType{IsAdjustedToUTC: true, Unit: format.TimeUnit{Value: unit}}
	return &TableSchema{IDs: map[string]int32{"id": 1, "ts": 2}, Stored: map[int32][]format.SchemaElement{
		1: {leafElement("id", 1, format.Required, format.Int64)}, 2: {ts},
	}}
}

func writeHive(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	write := func(name string, rows any) {
		files[name] = filepath.Join(dir, name+".parquet")
		var err error
		switch r := rows.(type) {
		case []hiveRow:
			err = parquet.WriteFile(files[name], r, parquet.MaxRowsPerRowGroup(150))
		case []hiveRowDict:
			err = parquet.WriteFile(files[name], r, parquet.MaxRowsPerRowGroup(150))
		case []icebergTSRow:
			err = parquet.WriteFile(files[name], r, parquet.MaxRowsPerRowGroup(150))
		case []millisRow:
			err = parquet.WriteFile(files[name], r)
		case []plainTSRow:
			err = parquet.WriteFile(files[name], r)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var hive []hiveRow
	var dict []hiveRowDict
	var ice []icebergTSRow
	var millis []millisRow
	var plain []plainTSRow
	for id := range int64(400) {
		hive = append(hive, hiveRow{id, int96Bytes96(hiveAt(id))})
		dict = append(dict, hiveRowDict{400 + id, int96Bytes96(hiveAt(400 + id%7))})
		ice = append(ice, icebergTSRow{800 + id, hiveAt(800 + id).UnixMicro()})
		millis = append(millis, millisRow{id, hiveAt(id).UnixMilli()})
		plain = append(plain, plainTSRow{1200 + id, hiveAt(1200 + id).UnixMicro()})
	}
	write("hive", hive)
	write("hive-dict", dict)
	write("iceberg", ice)
	write("millis", millis)
	write("plain", plain)
	return files
}

func int96Bytes96(at time.Time) (v deprecated.Int96) {
	b := int96Bytes(at)
	for i := range v {
		v[i] = uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24
	}
	return v
}

// checkTimes checks every row's ts, in units of unit nanoseconds, against
// hiveAt of its id (the dictionary file repeats seven times).
func checkTimes(t *testing.T, plan *Plan, d *Decoder, unit int64) {
	t.Helper()
	var b column.Batch
	for _, u := range plan.Units {
		if err := d.Decode(context.Background(), u, &b); err != nil {
			t.Fatal(err)
		}
		ids := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b.Columns[0].Data))), b.Rows)
		ts := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b.Columns[1].Data))), b.Rows)
		for r, id := range ids {
			at := id
			if id >= 400 && id < 800 {
				at = 400 + (id-400)%7
			}
			if want := floorDiv(hiveAt(at).UnixNano(), unit); ts[r] != want {
				t.Fatalf("%s row %d (id %d): ts %d, want %d", u.File, r, id, ts[r], want)
			}
		}
	}
}

// TestInt96InTable: in a table whose ts is an INT64 timestamp, a file
// that stores it as INT96 reads in the table's unit, rounded down,
// whichever file comes first, plain or dictionary-encoded, and through a
// CPU peer's verified decoder with the plan's fields sent as JSON. Files
// of two units, or INT96 beside INT64, plan together only with a table.
func TestInt96InTable(t *testing.T) {
	files := writeHive(t, t.TempDir())
	in := func(names ...string) (out []string) {
		for _, n := range names {
			out = append(out, files[n])
		}
		return out
	}
	for _, tc := range []struct {
		files []string
		unit  format.TimeUnitValue
	}{
		{[]string{"hive", "hive-dict", "iceberg"}, &format.MicroSeconds{}},
		{[]string{"iceberg", "hive"}, &format.MicroSeconds{}},
		{[]string{"hive-dict"}, &format.MicroSeconds{}},
		{[]string{"hive", "hive-dict"}, &format.MilliSeconds{}},
		{[]string{"hive"}, &format.NanoSeconds{}},
	} {
		t.Run(fmt.Sprint(tc.files, tc.unit), func(t *testing.T) {
			plan := planTable(t, in(tc.files...), nil, tsTable(tc.unit), nil, "")
			unit := int64(tc.unit.Duration())
			if f := plan.Fields[1]; f.DType != column.Int64 || f.TimeUnit != unit || format.Type(f.Physical) != format.Int64 {
				t.Fatalf("field %+v, want int64 timestamps of %d ns", f, unit)
			}
			d := plan.NewDecoder()
			defer d.Close()
			checkTimes(t, plan, d, unit)
			wire, err := json.Marshal(plan.Fields)
			if err != nil {
				t.Fatal(err)
			}
			var fields []Field
			if err := json.Unmarshal(wire, &fields); err != nil {
				t.Fatal(err)
			}
			peer, err := PlanOf(fields, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			vd := peer.NewDecoder()
			defer vd.Close()
			vd.VerifyUnits()
			checkTimes(t, plan, vd, unit)
		})
	}
	planTable(t, in("hive", "iceberg"), nil, nil, ErrSchemaMismatch, "type")
	planTable(t, in("millis", "iceberg"), nil, nil, ErrSchemaMismatch, "timestamps of milliseconds vs microseconds")
	// A plain INT64 beside microsecond timestamps: the same numbers, and
	// the plan knows their unit whichever file comes first.
	for _, names := range [][]string{{"plain", "iceberg"}, {"iceberg", "plain"}} {
		plan := planTable(t, in(names...), nil, nil, nil, "")
		if u := plan.Fields[1].TimeUnit; u != 1000 {
			t.Fatalf("%v: time unit %d, want 1000", names, u)
		}
		checkTimes(t, plan, plan.NewDecoder(), 1000)
	}
	plan := planTable(t, in("hive"), nil, nil, nil, "")
	checkTimes(t, plan, plan.NewDecoder(), 1) // no table: nanoseconds, as before
}

// TestViewableChunks: a unit whose chunk claims a stored type its field
// cannot be read from is refused before a page is read.
func TestViewableChunks(t *testing.T) {
	files := writeHive(t, t.TempDir())
	plan := planTable(t, []string{files["hive"]}, nil, tsTable(&format.MicroSeconds{}), nil, "")
	d := plan.NewDecoder()
	defer d.Close()
	var b column.Batch
	for _, tc := range []struct {
		chunk int
		as    format.Type
	}{
		{0, format.Int96}, // id is no timestamp
		{0, format.Int32}, // int to long would be a promotion, but id's file stores INT64 (and verify is off)
		{1, format.Float},
		{1, format.Int32}, // a date made a timestamp would be a promotion, but ts's file stores INT96
	} {
		u := plan.Units[0]
		u.Chunks = append([]Chunk(nil), u.Chunks...)
		u.Chunks[tc.chunk].Physical = int32(tc.as)
		err := d.Decode(context.Background(), u, &b)
		if tc.as == format.Int32 {
			continue // a legal pair: only a verified decoder checks it against the file
		}
		if !errors.Is(err, ErrBadUnit) {
			t.Fatalf("chunk %d stored as %v: %v, want ErrBadUnit", tc.chunk, tc.as, err)
		}
	}
	f := plan.Fields[0]
	f.StoredPhysical = int32(format.Int96)
	if _, err := PlanOf([]Field{f, plan.Fields[1]}, nil, nil); err == nil {
		t.Fatal("PlanOf took an id stored as INT96")
	}
	f = plan.Fields[1]
	f.TimeUnit = 7
	if _, err := PlanOf([]Field{plan.Fields[0], f}, nil, nil); err == nil {
		t.Fatal("PlanOf took a time unit of 7 ns")
	}
}
