package decode

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
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
			vd := decodeVerified(t, plan)
			var b column.Batch
			for _, u := range plan.Units {
				if u.Chunks[1].Physical == 0 {
					continue
				}
				u.Chunks[1].Physical = int32(format.Float) // not what the file has
				if err := vd.Decode(context.Background(), u, &b); !errors.Is(err, ErrBadUnit) {
					t.Fatalf("a chunk stored as FLOAT, the file's INT32: %v, want ErrBadUnit", err)
				}
			}
		})
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

// TestDateNotPromoted: a date column a table has made a timestamp
// (format v3) is not widened as an int would be: days are not
// microseconds. The files disagree, and planning them together fails.
func TestDateNotPromoted(t *testing.T) {
	type (
		dated struct {
			D int32 `parquet:"d,date,id(2)"`
		}
		stamped struct {
			D int64 `parquet:"d,timestamp(microsecond),id(2)"`
		}
	)
	dir := t.TempDir()
	old, now := filepath.Join(dir, "a.parquet"), filepath.Join(dir, "b.parquet")
	writePG(t, old, []dated{{1}, {2}}, "snappy", 1)
	writePG(t, now, []stamped{{86400e6}}, "snappy", 1)
	ts := leafElement("d", 2, format.Required, format.Int64)
	ts.LogicalType.Value = &format.TimestampType{Unit: format.TimeUnit{Value: &format.MicroSeconds{}}}
	ts.ConvertedType.Set(deprecated.TimestampMicros)
	table := &TableSchema{IDs: map[string]int32{"d": 2}, Stored: map[int32][]format.SchemaElement{2: {ts}}}
	planTable(t, []string{old, now}, []string{"d"}, table, ErrSchemaMismatch, "type int32")
	// Each alone: a date counts days, the timestamp microseconds.
	for path, unit := range map[string]int64{old: nanosPerDay, now: 1000} {
		if f := planTable(t, []string{path}, []string{"d"}, nil, nil, "").Fields[0]; f.Counts() != unit {
			t.Errorf("%s: a value counts %d ns, want %d", path, f.Counts(), unit)
		}
	}
}
