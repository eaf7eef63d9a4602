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
	meta := deletedTable(t, filepath.Join(f.data, "events"), icebergtest.Layout{ByPart: true, RowGroupRows: 250}, 3000,
		func(id int64) string { return string(rune('a' + id%3)) },
		func(id int64) bool { return id%7 == 0 || (id >= 900 && id < 1500) })
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
// ticket larger than a peer takes, or expand past what a peer expands,
// is computed here, not sent.
func TestSpillDeclinesHugeTicket(t *testing.T) {
	f := newFixture(t)
	job := f.job("huge")
	_, addr := f.server(nil)
	cfg := SpillerConfig{}
	cfg.Policy.Always = true
	sp, err := testSpiller(f.pool(f.ca.issue("gpu-host"), addr), f.roots, f.text(job.Name), job, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		rows       int64
		step, upTo int32 // delete rows 0, step, 2·step, ... below upTo
	}{
		{"a bitmap over 1 MiB", 1 << 23, 2, 1 << 23},
		{"more rows than a peer expands", maxDeletedRows + 2, 1, maxDeletedRows + 1},
	} {
		u := localPlan(t, job).Units[0]
		u.Rows = c.rows
		u.Deleted = make([]int32, 0, c.upTo/c.step+1)
		for r := int32(0); r < c.upTo; r += c.step {
			u.Deleted = append(u.Deleted, r)
		}
		var out column.Batch
		sent, err := sp.RunUnit(context.Background(), u, &out, engine.Load{LocalWorkers: 1, LocalBusy: 1, SecondsPerRow: 1})
		if err != nil || sent {
			t.Fatalf("%s: RunUnit: sent %v, %v; want it declined", c.name, sent, err)
		}
	}
	if n := sp.Stats().Declined()["ticket too large"]; n != 2 {
		t.Fatalf("declined %v", sp.Stats().Declined())
	}
}

// TestSpillIcebergManyDeletes: units of 180,000 deleted rows each, whose
// ticket of version 2 would have taken about 1.2 MB of JSON numbers
// (more than a peer parses), goes to the peer in a version 3 ticket with
// its rows as a bitmap, and comes back byte-identical.
func TestSpillIcebergManyDeletes(t *testing.T) {
	f := newFixture(t)
	const n = 600_000 // three units of 200,000 rows
	meta := deletedTable(t, filepath.Join(f.data, "many"), icebergtest.Layout{RowGroupRows: n / 3}, n,
		func(int64) string { return "a" },
		func(id int64) bool { return id%10 != 0 && id%1000 != 999 })
	text := fmt.Sprintf(`version: 1
name: many
inputs: ["iceberg:%s"]
batch: {size: 1000, last: keep}
epochs: 1
seed: 9
ring: {slots: 4, dir: %s}
decode: {workers: 1}
pipeline:
  - select: [id, score]
`, meta, f.shm)
	_, want, _ := f.localThenSpilled("many", text)
	// 60,000 multiples of 10 and the 600 rows ending in 999 are kept.
	if n := len(want[0]); n != 61 {
		t.Fatalf("the local run gave %d batches of up to 1000; want 61", n)
	}
}

// deletedTable writes an Iceberg table at dir of n rows with ids 0 to n-1
// (part(id) their partition value), then deletes by position the rows
// for which del(id) holds; it returns the metadata file's path.
func deletedTable(t *testing.T, dir string, layout icebergtest.Layout, n int64, part func(int64) string, del func(int64) bool) string {
	t.Helper()
	tab, err := icebergtest.New(dir, layout)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]icebergtest.Row, n)
	for i := range rows {
		id := int64(i)
		rows[i] = icebergtest.Row{ID: id, Part: part(id), Key: id % 13, Score: float64(id) / 4}
	}
	if _, _, err := tab.Append(rows); err != nil {
		t.Fatal(err)
	}
	var gone []icebergtest.Position
	for id := range n {
		if del(id) {
			p, _ := tab.Locate(id)
			gone = append(gone, p)
		}
	}
	_, meta, err := tab.DeletePositions(gone, 0)
	if err != nil {
		t.Fatal(err)
	}
	return meta
}
