package decode

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// A table whose columns were promoted: n int to long, x float to double,
// d decimal(9, 2) to decimal(18, 2), l list<int> to list<long>.
type (
	promoRowOld struct {
		ID int64   `parquet:"id,id(1)"`
		N  int32   `parquet:"n,id(2)"`
		X  float32 `parquet:"x,id(3)"`
		D  int32   `parquet:"d,decimal(2:9),id(4)"`
		L  []int32 `parquet:"l,list,id(5)"`
	}
	// the same, dictionary-encoded
	promoRowOldDict struct {
		ID int64   `parquet:"id,id(1)"`
		N  int32   `parquet:"n,id(2),dict"`
		X  float32 `parquet:"x,id(3),dict"`
		D  int32   `parquet:"d,decimal(2:9),id(4),dict"`
		L  []int32 `parquet:"l,list,id(5)"`
	}
	promoRowNew struct {
		ID int64   `parquet:"id,id(1)"`
		N  int64   `parquet:"n,id(2)"`
		X  float64 `parquet:"x,id(3)"`
		D  int64   `parquet:"d,decimal(2:18),id(4)"`
		L  []int64 `parquet:"l,list,id(5)"`
	}
)

// promoValues are row id's values: n = 7·id - 500, x = id/4, d = 3·id
// hundredths, l = [id, -id].
func promoValues(id int64) (n int64, x float64, d float64, l []int64) {
	return 7*id - 500, float64(id) / 4, float64(3*id) / 100, []int64{id, -id}
}

// TestPromotedColumns: files written before the table promoted a column
// read it as the table's type, whichever file comes first and however
// the narrower values are encoded; the row group statistics of the old
// files still bound the values; a peer checks a chunk's stored type
// against its footer.
func TestPromotedColumns(t *testing.T) {
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name+".parquet") }
	writePromo(t, path("old"), 0, 400, func(id int64) promoRowOld {
		n, x, d, _ := promoValues(id)
		return promoRowOld{id, int32(n), float32(x), int32(math.Round(d * 100)), []int32{int32(id), int32(-id)}}
	})
	writePromo(t, path("old-dict"), 400, 300, func(id int64) promoRowOldDict {
		n, x, d, _ := promoValues(id)
		return promoRowOldDict{id, int32(n), float32(x), int32(math.Round(d * 100)), []int32{int32(id), int32(-id)}}
	})
	writePromo(t, path("new"), 700, 300, func(id int64) promoRowNew {
		n, x, d, l := promoValues(id)
		return promoRowNew{id, n, x, int64(math.Round(d * 100)), l}
	})
	table := &TableSchema{IDs: map[string]int32{"id": 1, "n": 2, "x": 3, "d": 4, "l": 5}, Stored: promotedTable()}
	for _, files := range [][]string{{"old", "old-dict", "new"}, {"new", "old"}, {"old-dict"}} {
		t.Run(fmt.Sprint(files), func(t *testing.T) {
			var in []string
			for _, f := range files {
				in = append(in, path(f))
			}
			plan, err := PlanFiles(context.Background(), in, PlanOptions{Table: func(string) *TableSchema { return table }})
			if err != nil {
				t.Fatal(err)
			}
			want := []column.DType{column.Int64, column.Int64, column.Float64, column.Float64, column.Int64}
			for i, f := range plan.Fields {
				if f.DType != want[i] {
					t.Fatalf("field %s: %v, want %v", f.Name, f.DType, want[i])
				}
			}
			rows := eachUnit(t, plan, func(u Unit, b *column.Batch, _ int) { checkPromoted(t, u.File, b) })
			if rows != int(plan.Rows) {
				t.Fatalf("%d rows, want %d", rows, plan.Rows)
			}
			checkPromotedBounds(t, plan, map[string]int64{path("old"): 0, path("old-dict"): 400, path("new"): 700})
			refusesFloatChunks(t, plan, 1)
		})
	}
}

// refusesFloatChunks: a peer's decoder refuses each unit of plan whose
// column col's chunk, stored narrower than its field (promoted), claims
// FLOAT, which its file does not store.
func refusesFloatChunks(t *testing.T, plan *Plan, col int) {
	t.Helper()
	vd := decodeVerified(t, plan)
	var b column.Batch
	for _, u := range plan.Units {
		if u.Chunks[col].Physical == 0 {
			continue
		}
		stored := format.Type(u.Chunks[col].Physical)
		u.Chunks[col].Physical = int32(format.Float) // not what the file has
		if err := vd.Decode(context.Background(), u, &b); !errors.Is(err, ErrBadUnit) {
			t.Fatalf("a chunk stored as FLOAT, the file's %v: %v, want ErrBadUnit", stored, err)
		}
	}
}

func checkPromoted(t *testing.T, file string, b *column.Batch) {
	t.Helper()
	ids := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b.Columns[0].Data))), b.Rows)
	ns := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b.Columns[1].Data))), b.Rows)
	xs := unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(b.Columns[2].Data))), b.Rows)
	ds := unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(b.Columns[3].Data))), b.Rows)
	lc := &b.Columns[4]
	lv := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(lc.Data))), lc.Values())
	for r, id := range ids {
		n, x, d, l := promoValues(id)
		got := lv[lc.Offsets[r]:lc.Offsets[r+1]]
		if ns[r] != n || xs[r] != x || math.Abs(ds[r]-d) > 1e-9 || !slices.Equal(got, l) {
			t.Fatalf("%s row %d: n %d x %v d %v l %v; want %d %v %v %v", file, r, ns[r], xs[r], ds[r], got, n, x, d, l)
		}
	}
}

// checkPromotedBounds: each unit's statistics of n bound its values,
// read from the file's own type; first gives each file's first id.
func checkPromotedBounds(t *testing.T, plan *Plan, first map[string]int64) {
	t.Helper()
	for _, u := range plan.Units {
		id := first[u.File] + u.RowStart
		lo, _, _, _ := promoValues(id)
		hi, _, _, _ := promoValues(id + u.Rows - 1)
		if b := u.Bounds[1]; !b.Known || !b.Int || b.MinInt > lo || b.MaxInt < hi {
			t.Fatalf("%s: bounds of n %+v, want [%d, %d] at least", u.File, b, lo, hi)
		}
	}
}

func writePromo[T any](t *testing.T, path string, first, n int, mk func(id int64) T) {
	rows := make([]T, n)
	for i := range rows {
		rows[i] = mk(int64(first + i))
	}
	writePG(t, path, rows, "snappy", 1)
}

// promotedTable is the table's columns as its writers store them now.
func promotedTable() map[int32][]format.SchemaElement {
	d := leafElement("d", 4, format.Required, format.Int64)
	d.LogicalType.Value = &format.DecimalType{Precision: 18, Scale: 2}
	d.ConvertedType.Set(deprecated.Decimal)
	d.Precision.Set(18)
	d.Scale.Set(2)
	return map[int32][]format.SchemaElement{
		1: {leafElement("id", 1, format.Required, format.Int64)},
		2: {leafElement("n", 2, format.Required, format.Int64)},
		3: {leafElement("x", 3, format.Required, format.Double)},
		4: {d},
		5: listElements("l", 5, format.Optional, leafElement("element", 6, format.Required, format.Int64)),
	}
}

// Dated rows: a date column that the table has since made a timestamp
// (format v3), written before (plain and dictionary-encoded) and after.
type (
	datedRow struct {
		ID int64 `parquet:"id,id(1)"`
		D  int32 `parquet:"d,date,id(2)"`
	}
	datedRowDict struct {
		ID int64 `parquet:"id,id(1)"`
		D  int32 `parquet:"d,date,id(2),dict"`
	}
	stampedRowMicros struct {
		ID int64 `parquet:"id,id(1)"`
		D  int64 `parquet:"d,timestamp(microsecond),id(2)"`
	}
	stampedRowNanos struct {
		ID int64 `parquet:"id,id(1)"`
		D  int64 `parquet:"d,timestamp(nanosecond),id(2)"`
	}
)

// dayOf is row id's date, in days from 1970 (some before it).
func dayOf(id int64) int64 { return 3*id - 100 }

// stampedTable is the table with d a timestamp in unit.
func stampedTable(unit int64) *TableSchema {
	ts := leafElement("d", 2, format.Required, format.Int64)
	u := format.TimeUnit{Value: &format.MicroSeconds{}}
	if unit == 1 {
		u = format.TimeUnit{Value: &format.NanoSeconds{}}
	}
	ts.LogicalType.Value = &format.TimestampType{Unit: u}
	return &TableSchema{IDs: map[string]int32{"id": 1, "d": 2}, Stored: map[int32][]format.SchemaElement{
		1: {leafElement("id", 1, format.Required, format.Int64)}, 2: {ts}}}
}

// TestDatePromoted: a date column that a table has made a timestamp
// (format v3's date to timestamp and timestamp_ns) reads each old file's
// days as each day's first instant in the table's unit, plain or
// dictionary-encoded, beside files written since; the old files'
// statistics bound the values in that unit; a peer checks a chunk's
// stored type against its footer.
func TestDatePromoted(t *testing.T) {
	for _, unit := range []int64{1000, 1} {
		t.Run(unitName(unit), func(t *testing.T) {
			dir := t.TempDir()
			path := func(name string) string { return filepath.Join(dir, name+".parquet") }
			writePromo(t, path("old"), 0, 300, func(id int64) datedRow { return datedRow{id, int32(dayOf(id))} })
			writePromo(t, path("old-dict"), 300, 200, func(id int64) datedRowDict { return datedRowDict{id, int32(dayOf(id / 10))} })
			per := nanosPerDay / unit
			if unit == 1 {
				writePromo(t, path("new"), 500, 100, func(id int64) stampedRowNanos { return stampedRowNanos{id, dayOf(id)*per + id} })
			} else {
				writePromo(t, path("new"), 500, 100, func(id int64) stampedRowMicros { return stampedRowMicros{id, dayOf(id)*per + id} })
			}
			want := func(id int64) int64 {
				switch {
				case id < 300:
					return dayOf(id) * per
				case id < 500:
					return dayOf(id/10) * per
				}
				return dayOf(id)*per + id
			}
			plan := planTable(t, []string{path("old"), path("old-dict"), path("new")}, nil, stampedTable(unit), nil, "")
			if f := plan.Fields[1]; f.DType != column.Int64 || f.Counts() != unit {
				t.Fatalf("d: %v counting %d ns, want int64 counting %d", f.DType, f.Counts(), unit)
			}
			first := map[string]int64{path("old"): 0, path("old-dict"): 300, path("new"): 500}
			eachUnit(t, plan, func(u Unit, b *column.Batch, _ int) {
				ids := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b.Columns[0].Data))), b.Rows)
				ds := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b.Columns[1].Data))), b.Rows)
				for r, id := range ids {
					if ds[r] != want(id) {
						t.Fatalf("%s row %d (id %d): %d, want %d", u.File, r, id, ds[r], want(id))
					}
				}
				lo, hi := want(first[u.File]+u.RowStart), want(first[u.File]+u.RowStart+u.Rows-1)
				if bd := u.Bounds[1]; !bd.Known || !bd.Int || bd.MinInt > lo || bd.MaxInt < hi {
					t.Fatalf("%s: bounds of d %+v, want [%d, %d] at least", u.File, bd, lo, hi)
				}
			})
			refusesFloatChunks(t, plan, 1)
		})
	}
}

// TestDatePastTheUnit: a date that a timestamp of the table's unit cannot
// hold (nanoseconds reach about 292 years from 1970) fails its unit
// naming the date, rather than wrapping to another instant; its file's
// statistics, which would overflow too, bound nothing.
func TestDatePastTheUnit(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "a.parquet")
	writePromo(t, old, 0, 3, func(id int64) datedRow { return datedRow{id, int32(20000 + 100000*id)} })
	plan := planTable(t, []string{old}, nil, stampedTable(1), nil, "")
	if b := plan.Units[0].Bounds[1]; b.Known {
		t.Errorf("bounds %+v of days past the unit", b)
	}
	d := NewDecoder(plan.Fields)
	defer d.Close()
	var b column.Batch
	err := d.Decode(context.Background(), plan.Units[0], &b)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "120000 days") || !strings.Contains(err.Error(), "nanoseconds") {
		t.Fatalf("a date of 120000 days read in nanoseconds: %v, want ErrUnsupported naming it", err)
	}
	// Microseconds hold it.
	eachUnit(t, planTable(t, []string{old}, nil, stampedTable(1000), nil, ""), func(Unit, *column.Batch, int) {})
}

// TestDateNotPromotedToLong: a date column a table says is a long (no
// promotion gives that: days are no count of anything else) is not
// widened as an int would be. The files disagree, and planning them
// together fails; each alone counts its own unit.
func TestDateNotPromotedToLong(t *testing.T) {
	type (
		dated struct {
			D int32 `parquet:"d,date,id(2)"`
		}
		long struct {
			D int64 `parquet:"d,id(2)"`
		}
	)
	dir := t.TempDir()
	old, now := filepath.Join(dir, "a.parquet"), filepath.Join(dir, "b.parquet")
	writePG(t, old, []dated{{1}, {2}}, "snappy", 1)
	writePG(t, now, []long{{86400e6}}, "snappy", 1)
	table := &TableSchema{IDs: map[string]int32{"d": 2}, Stored: map[int32][]format.SchemaElement{2: {leafElement("d", 2, format.Required, format.Int64)}}}
	planTable(t, []string{old, now}, []string{"d"}, table, ErrSchemaMismatch, "type int32")
	for path, unit := range map[string]int64{old: nanosPerDay, now: 0} {
		if f := planTable(t, []string{path}, []string{"d"}, nil, nil, "").Fields[0]; f.TimeUnit != unit {
			t.Errorf("%s: a value counts %d ns, want %d", path, f.TimeUnit, unit)
		}
	}
}
