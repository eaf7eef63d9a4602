package peer

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
)

// TestSpillInt96ByteIdentical: a job over an INT96 event time (Spark's
// default timestamp) gives a peer's units byte for byte as its own; its
// first row group, which the row_id statistics rule out, is pruned here
// and never sent.
func TestSpillInt96ByteIdentical(t *testing.T) {
	f := newFixture(t)
	type row struct {
		RowID int64            `parquet:"row_id"`
		TS    deprecated.Int96 `parquet:"ts,dict"`
		Seen  deprecated.Int96 `parquet:"seen"`
	}
	const firstDay = 2461000 // Julian: 2025-11-20
	rows := make([]row, 4000)
	for i := range rows {
		day := uint32(firstDay + i%30)
		rows[i] = row{RowID: int64(i), TS: deprecated.Int96{uint32(i) * 7919, 0, day}, Seen: deprecated.Int96{uint32(i), 1, day - 1}}
	}
	path := filepath.Join(f.data, "events.parquet")
	if err := parquet.WriteFile(path, rows, parquet.MaxRowsPerRowGroup(1500)); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf(`version: 1
name: int96
inputs: [%s]
columns: [row_id, ts, seen]
batch: {size: 100, last: drop}
epochs: 1
seed: 5
shuffle: {units: true, buffer: 300}
ring: {slots: 4, dir: %s}
decode: {max_unit_rows: 700, workers: 1}
pipeline:
  - filter: "ts >= %d and row_id >= 1600"
  - map: {age_s: "(ts - seen) / 1000000000"}
`, path, f.shm, time.Unix((firstDay+15-2440588)*86400, 0).UnixNano())
	_, want, _ := f.localThenSpilled("int96", text)
	if n := len(want[0]); n >= len(rows)/100 {
		t.Fatalf("the local run gave %d batches: the filter should keep about half of %d rows", n, len(rows))
	}
}
