package iceberg_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/iceberg/icebergtest"
)

// FuzzParseRef: any spec input either fails to parse or parses to a Ref
// whose text parses back to the same Ref.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{
		"iceberg:/wh/t/metadata/v1.metadata.json", "iceberg:wh/v1.json?snapshot=42", "iceberg:s3a://b/k.json",
		"iceberg:http://cat:8181/api?table=a.b.c&snapshot=-5", "iceberg:file:///x.json", "iceberg:file:/x.json",
		"iceberg:?", "iceberg:http://[::1]:80?table=a.b", "iceberg:%zz?table=%00.b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		r, err := iceberg.ParseRef(in)
		if err != nil {
			return
		}
		again, err := iceberg.ParseRef(r.String())
		if err != nil {
			t.Fatalf("%q parsed to %q, which does not parse: %v", in, r.String(), err)
		}
		if again.String() != r.String() || again.Snapshot != r.Snapshot {
			t.Fatalf("%q: %q then %q", in, r.String(), again.String())
		}
	})
}

// FuzzParseMetadata: table metadata from anywhere parses or fails, never
// panics, and what parses has a current schema and consistent snapshots.
func FuzzParseMetadata(f *testing.F) {
	f.Add([]byte(`{"format-version": 2, "schemas": [{"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": true}]}], "current-schema-id": 0,
		"partition-specs": [{"spec-id": 0, "fields": [{"source-id": 1, "field-id": 1000, "name": "b", "transform": "bucket[4]"}]}], "default-spec-id": 0,
		"current-snapshot-id": 7, "snapshots": [{"snapshot-id": 7, "sequence-number": 1, "timestamp-ms": 1, "manifest-list": "/x.avro"}]}`))
	f.Add([]byte(`{"format-version": 1, "schema": {"type": "struct", "fields": []}}`))
	f.Add([]byte(`{"format-version": 2, "schemas": [null]}`))
	f.Add([]byte(`{"format-version": 3, "schemas": [], "current-snapshot-id": -1}`))
	tab, err := newTableForSeed(f.TempDir())
	if err == nil {
		f.Add(tab)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := iceberg.ParseMetadata(data)
		if err != nil {
			return
		}
		if _, err := m.Snapshot(0); err != nil && m.CurrentSnapshotID != nil && *m.CurrentSnapshotID != -1 {
			t.Fatalf("current snapshot %d parsed but not found: %v", *m.CurrentSnapshotID, err)
		}
		for _, s := range m.Snapshots {
			if got, err := m.Snapshot(s.ID); s.ID != 0 && (err != nil || got.ID != s.ID) {
				t.Fatalf("snapshot %d: %v", s.ID, err)
			}
		}
	})
}

func newTableForSeed(dir string) ([]byte, error) {
	tab, err := icebergtestNew(filepath.Join(dir, "t"))
	if err != nil {
		return nil, err
	}
	if _, _, err := tab.Append(rows(0, 10)); err != nil {
		return nil, err
	}
	return tab.MetadataJSON()
}

// FuzzScanManifests mutates one file of a table's current snapshot at a
// time (its metadata JSON, manifest list, data and delete manifests, a
// position delete file) and scans the snapshot, as a job on the table
// plans: lastmiled reads these files for users who can write them, so a
// scan must end in files or an error, never a panic.
func FuzzScanManifests(f *testing.F) {
	dir := f.TempDir()
	tab, err := icebergtestNew(filepath.Join(dir, "t"))
	if err != nil {
		f.Fatal(err)
	}
	if _, _, err := tab.Append(rows(0, 40)); err != nil {
		f.Fatal(err)
	}
	pos, _ := tab.Locate(3)
	if _, _, err := tab.DeletePositions([]icebergtest.Position{pos}, 0); err != nil {
		f.Fatal(err)
	}
	fuzzTableFiles(f, tab.MetadataPath(), filepath.Join(dir, "t"), "delete-*.parquet")
}

// FuzzScanDeletes is FuzzScanManifests for a format 3 table with an
// equality delete file and a deletion vector (a Puffin file).
func FuzzScanDeletes(f *testing.F) {
	dir := filepath.Join(f.TempDir(), "t")
	tab, err := icebergtest.New(dir, icebergtest.Layout{ByPart: true, FormatVersion: 3})
	if err != nil {
		f.Fatal(err)
	}
	if _, _, err := tab.Append(rows(0, 40)); err != nil {
		f.Fatal(err)
	}
	if _, _, err := tab.DeleteEquality("a", "key", []int64{28, 56}, 0); err != nil {
		f.Fatal(err)
	}
	pos, _ := tab.Locate(5)
	if _, _, err := tab.DeleteVector(pos.File, []int64{pos.Pos}, 0); err != nil {
		f.Fatal(err)
	}
	fuzzTableFiles(f, tab.MetadataPath(), dir, "*[ev]-*")
}

// fuzzTableFiles seeds f with the metadata file meta, the Avro files of
// the table in dir and its files under data/ matching deletes, and
// fuzzes one of them at a time, scanning the table's current snapshot.
func fuzzTableFiles(f *testing.F, meta, dir, deletes string) {
	files, _ := filepath.Glob(filepath.Join(dir, "metadata", "*.avro"))
	dels, _ := filepath.Glob(filepath.Join(dir, "data", deletes))
	files = append(append(files, meta), dels...)
	orig := make([][]byte, len(files))
	for i, p := range files {
		var err error
		if orig[i], err = os.ReadFile(p); err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), orig[i])
	}
	if testing.Verbose() {
		f.Logf("fuzzing %d files: %v", len(files), files)
	}
	ctx := context.Background()
	if sc, err := (iceberg.Opener{}).Scan(ctx, "iceberg:"+meta); err != nil || len(sc.Files) == 0 {
		f.Fatalf("the seed table scans to %v, %v", sc, err)
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		i := int(which) % len(files)
		if err := os.WriteFile(files[i], data, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(files[i], orig[i], 0o644)
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("%s mutated: panic: %v\n%s", filepath.Base(files[i]), r, debug.Stack())
			}
		}()
		iceberg.Opener{}.Scan(ctx, "iceberg:"+meta)
	})
}
