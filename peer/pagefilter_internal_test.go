package peer

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestSpillPageFilterByteIdentical: units whose pages a filter rules
// out by the ColumnIndex give the same batches through a peer as
// locally: the peer rules out the same rows from the same file. A
// filter column without page bounds takes part by the unit's, which a
// unit sent to a peer does not carry.
func TestSpillPageFilterByteIdentical(t *testing.T) {
	f := newFixture(t)
	type row struct {
		RowID int64   `parquet:"row_id"`
		TS    int64   `parquet:"ts"`
		Cnt   uint32  `parquet:"cnt"` // UINT_32: no page bounds, its statistics are the unit's
		Seq   []int64 `parquet:"seq,list"`
	}
	rows := make([]row, 6000)
	for i := range rows {
		rows[i] = row{RowID: int64(i), TS: int64(i) * 60, Cnt: uint32(i % 7)}
		for k := range i % 4 {
			rows[i].Seq = append(rows[i].Seq, int64(i+k))
		}
	}
	path := filepath.Join(f.data, "events.parquet")
	if err := parquet.WriteFile(path, rows, parquet.MaxRowsPerRowGroup(3000), parquet.PageBufferSize(2048)); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf(`version: 1
name: pages
inputs: [%s]
batch: {size: 50, last: drop}
epochs: 1
seed: 5
shuffle: {units: true, buffer: 200}
ring: {slots: 4, dir: %s}
decode: {workers: 1}
pipeline:
  - filter: '((ts >= 60000 and ts < 90000) or (ts >= 250000 and ts < 280000)) and cnt >= 1'
`, path, f.shm)
	f.localThenSpilled("pages", text)
}
