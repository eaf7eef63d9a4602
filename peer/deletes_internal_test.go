package peer

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/iceberg/icebergtest"
)

// TestSpillIcebergDeletesByteIdentical: a peer drops the rows an Iceberg
// snapshot's position deletes name, as the host does: the spilled run's
// batches are the local run's, byte for byte.
func TestSpillIcebergDeletesByteIdentical(t *testing.T) {
	f := newFixture(t)
	tab, err := icebergtest.New(filepath.Join(f.data, "events"), icebergtest.Layout{ByPart: true, RowGroupRows: 250})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]icebergtest.Row, 3000)
	for i := range rows {
		id := int64(i)
		rows[i] = icebergtest.Row{ID: id, Part: string(rune('a' + id%3)), Key: id % 13, Score: float64(id) / 4}
	}
	if _, _, err := tab.Append(rows); err != nil {
		t.Fatal(err)
	}
	var del []icebergtest.Position
	for id := range int64(3000) {
		if id%7 == 0 || (id >= 900 && id < 1500) {
			p, _ := tab.Locate(id)
			del = append(del, p)
		}
	}
	_, meta, err := tab.DeletePositions(del, 0)
	if err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf(`version: 1
name: deletes
inputs: ["iceberg:%s"]
batch: {size: 100, last: drop}
epochs: 1
seed: 9
shuffle: {units: true, buffer: 300}
ring: {slots: 4, dir: %s}
decode: {max_unit_rows: 100, workers: 1}
pipeline:
  - filter: "key != 3"
  - rename: {id: row_id}
  - select: [row_id, score]
`, meta, f.shm)
	_, want, _ := f.localThenSpilled("deletes", text)
	// 3000 rows less 1/7 and the 600 of 900..1499 (86 of them multiples
	// of 7), less 1/13 of the rest by the filter: about 1907 rows.
	if n := len(want[0]); n < 17 || n > 20 {
		t.Fatalf("the local run gave %d batches of 100; want about 19", n)
	}
}

// TestSpillDeclinesHugeTicket: a unit whose deleted rows would make its
// ticket larger than a peer takes is computed here, not sent.
func TestSpillDeclinesHugeTicket(t *testing.T) {
	f := newFixture(t)
	job := f.job("huge")
	_, addr := f.server(nil)
	cfg := SpillerConfig{}
	cfg.Policy.Always = true
	sp, err := NewSpiller(f.pool(f.ca.issue("gpu-host"), addr), f.roots, f.text(job.Name), job, cfg)
	if err != nil {
		t.Fatal(err)
	}
	u := localPlan(t, job).Units[0]
	u.Rows = 1 << 22
	u.Deleted = make([]int32, 1<<20)
	for i := range u.Deleted {
		u.Deleted[i] = int32(3 * i)
	}
	var out column.Batch
	sent, err := sp.RunUnit(context.Background(), u, &out, engine.Load{LocalWorkers: 1, LocalBusy: 1, SecondsPerRow: 1})
	if err != nil || sent {
		t.Fatalf("RunUnit: sent %v, %v; want it declined", sent, err)
	}
	if n := sp.Stats().Declined()["ticket too large"]; n != 1 {
		t.Fatalf("declined %v", sp.Stats().Declined())
	}
}
