package peer

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestSpillHashedByteIdentical: strings and lists of strings read as ids
// (spec hashed), and a map read as its keys and values, give the same
// batches through a peer as locally: the peer hashes them from the job
// it is sent, with the same moduli.
func TestSpillHashedByteIdentical(t *testing.T) {
	f := newFixture(t)
	type row struct {
		RowID int64              `parquet:"row_id"`
		Cats  []string           `parquet:"cats,list,dict"`
		Query *string            `parquet:"query,optional"`
		Extra map[string]float32 `parquet:"extra"`
	}
	rows := make([]row, 4000)
	for i := range rows {
		rows[i] = row{RowID: int64(i), Extra: map[string]float32{"k": float32(i), fmt.Sprint("k", i%9): 0.5}}
		for k := range i % 5 {
			rows[i].Cats = append(rows[i].Cats, fmt.Sprintf("cat-%d", (i*3+k)%211))
		}
		if i%7 != 0 {
			q := fmt.Sprintf("q %d", i%503)
			rows[i].Query = &q
		}
	}
	path := filepath.Join(f.data, "clicks.parquet")
	if err := parquet.WriteFile(path, rows, parquet.MaxRowsPerRowGroup(1500)); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf(`version: 1
name: hashed
inputs: [%s]
hashed: {cats: 100003, query: 977, extra.key: 64}
batch: {size: 100, last: drop}
epochs: 1
seed: 5
shuffle: {units: true, buffer: 300}
ring: {slots: 4, dir: %s}
decode: {max_unit_rows: 700, workers: 1}
pipeline:
  - filter: "len(cats) >= 1 and row_id >= 1600"
  - map: {q2: "fill_null(query, -1) * 2"}
  - select: [row_id, cats, query, q2, extra.key, extra.value]
`, path, f.shm)
	_, want, _ := f.localThenSpilled("hashed", text)
	if n := len(want[0]); n >= len(rows)/100 {
		t.Fatalf("the local run gave %d batches: the filter should keep about half of %d rows", n, len(rows))
	}
}
