package peer

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/lastmile/lastmile/iceberg/icebergtest"
	"github.com/lastmile/lastmile/spec"
)

// Spilling units of an Iceberg table whose schema changed after some of
// its files were written. Each test's table holds ids 0..2999, half of
// them written before the change, in files partitioned by id mod 3 with
// row groups of 250 rows; its job keeps the rows whose key is not 3 and
// selects some columns.

// TestSpillIcebergAddedColumnsByteIdentical: columns added to an Iceberg
// table after some of its files were written read as nulls in those
// files on a peer as on the host: the tickets carry the requester's
// columns (a peer planning the unit's file alone would not find the new
// ones, nor a renamed one) and the units' absent chunks, the peer reads
// nothing for them, and the spilled run's batches are the local run's,
// byte for byte.
func TestSpillIcebergAddedColumnsByteIdentical(t *testing.T) {
	f := newFixture(t)
	tab := evolvedTable(t, f, icebergtest.Layout{})
	with := func(r *icebergtest.Row) {
		if r.ID%2 == 0 {
			w := float64(r.ID) / 8
			r.Weight = &w
		}
		if r.ID%3 != 0 {
			r.Tags = []int64{r.ID, r.ID % 7}
		}
	}
	appendIDs(t, tab, 0, 1500, with)
	if _, err := tab.AddColumns(); err != nil {
		t.Fatal(err)
	}
	appendIDs(t, tab, 1500, 1500, with)
	meta, err := tab.Rename("id", "row_id") // and a rename, which the files do not know
	if err != nil {
		t.Fatal(err)
	}
	spillsEvolved(t, f, evolvedJob("added", meta, f.shm, "row_id, weight, tags"))
}

// TestSpillIcebergPromotedByteIdentical: a column promoted since some of
// a table's files were written (float to double) is widened on a peer
// as on the host, each unit by the type its file stores, which its
// chunks carry, whichever file the peer compiled the job by.
func TestSpillIcebergPromotedByteIdentical(t *testing.T) {
	f := newFixture(t)
	tab := evolvedTable(t, f, icebergtest.Layout{FloatScore: true})
	appendIDs(t, tab, 0, 1500, nil)
	if _, err := tab.PromoteScore(); err != nil {
		t.Fatal(err)
	}
	appendIDs(t, tab, 1500, 1500, nil)
	spillsEvolved(t, f, evolvedJob("promoted", tab.MetadataPath(), f.shm, "id, score"))
}

// TestSpillIcebergDefaultByteIdentical: a column added with an initial
// default reads it on a peer as on the host: the value travels in the
// units' absent chunks.
func TestSpillIcebergDefaultByteIdentical(t *testing.T) {
	f := newFixture(t)
	tab := evolvedTable(t, f, icebergtest.Layout{FormatVersion: 3})
	appendIDs(t, tab, 0, 3000, nil)
	meta, err := tab.AddDefaulted()
	if err != nil {
		t.Fatal(err)
	}
	spillsEvolved(t, f, evolvedJob("defaulted", meta, f.shm, "id, bonus"))
}

// TestSpillIcebergMigratedByteIdentical: a table migrated from Hive, its
// old files storing ts as INT96 and its new ones as INT64 microseconds,
// reads ts in microseconds on a peer as on the host: the plan's fields
// carry the table's time unit, and the INT96 chunks their stored type.
func TestSpillIcebergMigratedByteIdentical(t *testing.T) {
	f := newFixture(t)
	tab := evolvedTable(t, f, icebergtest.Layout{Hive: true})
	appendIDs(t, tab, 0, 1500, nil)
	tab.NativeWrites()
	appendIDs(t, tab, 1500, 1500, nil)
	spillsEvolved(t, f, evolvedJob("migrated", tab.MetadataPath(), f.shm, "id, ts"))
}

// TestSpillIcebergDatedByteIdentical: a date column a table has made a
// timestamp (format v3) reads its old files' days in microseconds on a
// peer as on the host: the plan's fields carry the table's unit, and the
// old files' chunks their stored INT32.
func TestSpillIcebergDatedByteIdentical(t *testing.T) {
	f := newFixture(t)
	tab := evolvedTable(t, f, icebergtest.Layout{Dated: true, FormatVersion: 3})
	appendIDs(t, tab, 0, 1500, nil)
	if _, err := tab.PromoteDay(); err != nil {
		t.Fatal(err)
	}
	appendIDs(t, tab, 1500, 1500, nil)
	spillsEvolved(t, f, evolvedJob("dated", tab.MetadataPath(), f.shm, "id, day"))
}

// evolvedTable starts a table under f's data root, partitioned by part,
// with l's other settings.
func evolvedTable(t *testing.T, f *fixture, l icebergtest.Layout) *icebergtest.Table {
	t.Helper()
	l.ByPart, l.RowGroupRows = true, 250
	tab, err := icebergtest.New(filepath.Join(f.data, "events"), l)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// appendIDs commits ids from..from+n-1 (part id mod 3, key id mod 13,
// score id/4), each row given its added columns by with (nil: none).
func appendIDs(t *testing.T, tab *icebergtest.Table, from, n int64, with func(*icebergtest.Row)) {
	t.Helper()
	rows := make([]icebergtest.Row, n)
	for i := range rows {
		id := from + int64(i)
		rows[i] = icebergtest.Row{ID: id, Part: string(rune('a' + id%3)), Key: id % 13, Score: float64(id) / 4}
		if with != nil {
			with(&rows[i])
		}
	}
	if _, _, err := tab.Append(rows); err != nil {
		t.Fatal(err)
	}
}

// evolvedJob is the spec of a job named name over the table at meta that
// keeps the rows whose key is not 3 and selects columns.
func evolvedJob(name, meta, shm, columns string) string {
	return fmt.Sprintf(`version: 1
name: %s
inputs: ["iceberg:%s"]
batch: {size: 100, last: drop}
epochs: 1
seed: 9
shuffle: {units: true, buffer: 300}
ring: {slots: 4, dir: %s}
decode: {max_unit_rows: 100, workers: 1}
pipeline:
  - filter: "key != 3"
  - select: [%s]
`, name, meta, shm, columns)
}

// spillsEvolved runs the job of text here, then with spilling until a
// peer has computed at least 10 units, checking every run's batches
// against the local ones and that no unit failed on the peer. The local
// run gives 26 to 28 batches (about 2,770 rows).
func spillsEvolved(t *testing.T, f *fixture, text string) {
	t.Helper()
	job, err := spec.Parse("", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := f.run(job, nil)
	if n := len(want[0]); n < 26 || n > 28 {
		t.Fatalf("the local run gave %d batches; want 26 to 28", n)
	}
	// Half the units are of files written before the schema changed: the
	// peer computes them by the requester's columns, never failing one.
	srv, addr := f.server(nil)
	p := f.pool(f.ca.issue("gpu-host"), addr)
	cfg := SpillerConfig{}
	cfg.Policy.Always = true
	for try := 0; try < 5 && srv.Stats().Units.Load() < 10; try++ {
		sp, err := testSpiller(p, f.roots, text, job, cfg)
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
