package engine_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
)

// sparkRow is a table as Spark writes it by default: its event time an
// INT96 timestamp, dictionary-encoded.
type sparkRow struct {
	RowID int64            `parquet:"row_id"`
	TS    deprecated.Int96 `parquet:"ts,dict"`
}

func int96Of(t time.Time) deprecated.Int96 {
	sec := t.Unix()
	days := sec / 86400
	if sec%86400 < 0 {
		days--
	}
	nod := uint64((sec-days*86400)*1e9 + int64(t.Nanosecond()))
	return deprecated.Int96{uint32(nod), uint32(nod >> 32), uint32(days + 2440588)}
}

// TestInt96TimeWindow keeps the rows of the last week by a filter on an
// INT96 event time, and hands the trainer the times as int64 nanoseconds.
func TestInt96TimeWindow(t *testing.T) {
	dir := t.TempDir()
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return start.Add(time.Duration(i%1000) * 37 * time.Minute) }
	rows := make([]sparkRow, 5000)
	for i := range rows {
		rows[i] = sparkRow{RowID: int64(i), TS: int96Of(at(i))}
	}
	path := filepath.Join(dir, "events.parquet")
	if err := parquet.WriteFile(path, rows, parquet.MaxRowsPerRowGroup(2000)); err != nil {
		t.Fatal(err)
	}
	cut := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	src := fmt.Sprintf(`
inputs: [%s]
columns: [row_id, ts]
batch: {size: 100, last: keep}
ring: {dir: %s, name: ts}
pipeline:
  - filter: 'ts >= timestamp("2026-11-20")'
`, path, dir)
	got := runDense(t, src, dir, "row_id", "ts")
	r := struct{ ids, ts []int64 }{got["row_id"], got["ts"]}
	var want []int64
	for i := range rows {
		if !at(i).Before(cut) {
			want = append(want, int64(i))
		}
	}
	if len(want) == 0 || len(want) == len(rows) || !slices.Equal(r.ids, want) {
		t.Fatalf("kept rows %d..., want the %d rows from %v on", len(r.ids), len(want), cut)
	}
	for k, id := range r.ids {
		if got := time.Unix(0, r.ts[k]).UTC(); !got.Equal(at(int(id))) {
			t.Fatalf("row %d: ts %v, want %v", id, got, at(int(id)))
		}
	}
}
