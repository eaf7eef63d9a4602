package peer

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/lastmile/lastmile/iceberg/icebergtest"
	"github.com/lastmile/lastmile/spec"
)

// TestSpillIcebergAddedColumnsByteIdentical: columns added to an Iceberg
// table after some of its files were written read as nulls in those
// files on a peer as on the host: the tickets carry the requester's
// columns (a peer planning the unit's file alone would not find the new
// ones, nor a renamed one) and the units' absent chunks, the peer reads nothing for them,
// and the spilled run's batches are the local run's, byte for byte.
func TestSpillIcebergAddedColumnsByteIdentical(t *testing.T) {
	f := newFixture(t)
	tab, err := icebergtest.New(filepath.Join(f.data, "events"), icebergtest.Layout{ByPart: true, RowGroupRows: 250})
	if err != nil {
		t.Fatal(err)
	}
	rows := func(from, n int64) []icebergtest.Row {
		out := make([]icebergtest.Row, n)
		for i := range out {
			id := from + int64(i)
			out[i] = icebergtest.Row{ID: id, Part: string(rune('a' + id%3)), Key: id % 13, Score: float64(id) / 4}
			if id%2 == 0 {
				w := float64(id) / 8
				out[i].Weight = &w
			}
			if id%3 != 0 {
				out[i].Tags = []int64{id, id % 7}
			}
		}
		return out
	}
	if _, _, err := tab.Append(rows(0, 1500)); err != nil {
		t.Fatal(err)
	}
	if _, err := tab.AddColumns(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tab.Append(rows(1500, 1500)); err != nil {
		t.Fatal(err)
	}
	meta, err := tab.Rename("id", "row_id") // and a rename, which the files do not know
	if err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf(`version: 1
name: added
inputs: ["iceberg:%s"]
batch: {size: 100, last: drop}
epochs: 1
seed: 9
shuffle: {units: true, buffer: 300}
ring: {slots: 4, dir: %s}
decode: {max_unit_rows: 100, workers: 1}
pipeline:
  - filter: "key != 3"
  - select: [row_id, weight, tags]
`, meta, f.shm)
	spillsEvolved(t, f, text, 26, 28)
}

// TestSpillIcebergPromotedByteIdentical: a column promoted since some of
// a table's files were written (float to double) is widened on a peer
// as on the host, each unit by the type its file stores, which its
// chunks carry, whichever file the peer compiled the job by.
func TestSpillIcebergPromotedByteIdentical(t *testing.T) {
	f := newFixture(t)
	tab, err := icebergtest.New(filepath.Join(f.data, "events"), icebergtest.Layout{ByPart: true, RowGroupRows: 250, FloatScore: true})
	if err != nil {
		t.Fatal(err)
	}
	rows := func(from, n int64) []icebergtest.Row {
		out := make([]icebergtest.Row, n)
		for i := range out {
			id := from + int64(i)
			out[i] = icebergtest.Row{ID: id, Part: string(rune('a' + id%3)), Key: id % 13, Score: float64(id) / 4}
		}
		return out
	}
	if _, _, err := tab.Append(rows(0, 1500)); err != nil {
		t.Fatal(err)
	}
	if _, err := tab.PromoteScore(); err != nil {
		t.Fatal(err)
	}
	_, meta, err := tab.Append(rows(1500, 1500))
	if err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf(`version: 1
name: promoted
inputs: ["iceberg:%s"]
batch: {size: 100, last: drop}
epochs: 1
seed: 9
shuffle: {units: true, buffer: 300}
ring: {slots: 4, dir: %s}
decode: {max_unit_rows: 100, workers: 1}
pipeline:
  - filter: "key != 3"
  - select: [id, score]
`, meta, f.shm)
	spillsEvolved(t, f, text, 26, 28)
}

// spillsEvolved runs the job of text here, then with spilling until a
// peer has computed at least 10 units, checking every run's batches
// against the local ones and that no unit failed on the peer. The local
// run gives between lo and hi batches.
func spillsEvolved(t *testing.T, f *fixture, text string, lo, hi int) {
	t.Helper()
	job, err := spec.Parse("", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := f.run(job, nil)
	if n := len(want[0]); n < lo || n > hi {
		t.Fatalf("the local run gave %d batches; want %d to %d", n, lo, hi)
	}
	// Half the units are of files written before the schema changed: the
	// peer computes them by the requester's columns, never failing one.
	srv, addr := f.server(nil)
	p := f.pool(f.ca.issue("gpu-host"), addr)
	cfg := SpillerConfig{}
	cfg.Policy.Always = true
	for try := 0; try < 5 && srv.Stats().Units.Load() < 10; try++ {
		sp, err := NewSpiller(p, f.roots, text, job, cfg)
		if err != nil {
			t.Fatal(err)
		}
		same(t, job.Name, f.run(job, sp), want)
		if n := sp.Stats().Fallbacks.Load(); n != 0 {
			t.Fatalf("%d units failed on the peer and ran here", n)
		}
	}
	if n, failed := srv.Stats().Units.Load(), srv.Stats().Failures.Load(); n < 10 || failed != 0 {
		t.Fatalf("the peer computed %d units and failed %d; want at least 10, none failed", n, failed)
	}
}

// TestSpillIcebergDefaultByteIdentical: a column added with an initial
// default reads it on a peer as on the host: the value travels in the
// units' absent chunks.
func TestSpillIcebergDefaultByteIdentical(t *testing.T) {
	f := newFixture(t)
	tab, err := icebergtest.New(filepath.Join(f.data, "events"), icebergtest.Layout{ByPart: true, RowGroupRows: 250, FormatVersion: 3})
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
	meta, err := tab.AddDefaulted()
	if err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf(`version: 1
name: defaulted
inputs: ["iceberg:%s"]
batch: {size: 100, last: drop}
epochs: 1
seed: 9
shuffle: {units: true, buffer: 300}
ring: {slots: 4, dir: %s}
decode: {max_unit_rows: 100, workers: 1}
pipeline:
  - filter: "key != 3"
  - select: [id, bonus]
`, meta, f.shm)
	spillsEvolved(t, f, text, 26, 28)
}
