package iceberg_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/iceberg/icebergtest"
	"github.com/lastmile/lastmile/objstore"
	"github.com/lastmile/lastmile/objstore/s3test"
)

// A table whose metadata, manifests and data files are S3 objects reads
// through the same decode.FS as S3 inputs: the metadata location is an
// s3:// URL, and so are the data files the scan lists.
func TestIcebergOnS3(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the S3 test server")
	}
	ctx := context.Background()
	srv, err := s3test.Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	root, err := srv.Bucket("lake")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := icebergtest.New(filepath.Join(root, "db", "events"), icebergtest.Layout{ByPart: true, URL: "s3://lake/db/events"})
	if err != nil {
		t.Fatal(err)
	}
	s1, _, err := tab.Append(rows(0, 100))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tab.Append(rows(100, 60)); err != nil {
		t.Fatal(err)
	}
	client, err := objstore.New(objstore.Config{Endpoint: srv.Endpoint, AccessKey: s3test.Access, SecretKey: s3test.Secret, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	fsys := decode.WithSchemes(nil, map[string]decode.FS{objstore.Scheme: client.Source(nil)})
	meta := "iceberg:s3://lake/db/events/metadata/v2.metadata.json"
	for _, tc := range []struct {
		input string
		rows  int64
	}{{meta, 160}, {fmt.Sprintf("%s?snapshot=%d", meta, s1), 100}} {
		sc, err := iceberg.Opener{FS: fsys}.Scan(ctx, tc.input)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range sc.Files {
			if !strings.HasPrefix(f.Path, "s3://lake/db/events/data/") {
				t.Fatalf("data file %q", f.Path)
			}
		}
		// The planner names the data files as the scan does: their
		// tables' field ids are found by those names (engine.InputPlan).
		named, err := decode.ExpandInputs(ctx, fsys, iceberg.Paths(sc.Files))
		if err != nil || !slices.Equal(named, iceberg.Paths(sc.Files)) {
			t.Fatalf("the planner names the data files %v (%v), the scan %v", named, err, iceberg.Paths(sc.Files))
		}
		plan, err := decode.PlanFiles(ctx, iceberg.Paths(sc.Files), decode.PlanOptions{Columns: []string{"id"}, FS: fsys})
		if err != nil {
			t.Fatal(err)
		}
		if plan.Rows != tc.rows || countRows(sc.Files) != tc.rows {
			t.Errorf("%s: planned %d rows (manifests say %d), want %d", tc.input, plan.Rows, countRows(sc.Files), tc.rows)
		}
	}
	kept, skipped := mustScan(t, iceberg.Opener{FS: fsys}, meta).Prune(prune(t, `part == "a"`))
	if len(kept) != 2 || skipped != 6 {
		t.Errorf("pruned to %d files, %d skipped; want 2, 6", len(kept), skipped)
	}
	// Position deletes: the delete file is an S3 object too, and names
	// its data files by their s3:// locations.
	first := tab.DataFiles()[0]
	if _, _, err := tab.DeletePositions([]icebergtest.Position{{File: first, Pos: 4}, {File: first, Pos: 1}}, 0); err != nil {
		t.Fatal(err)
	}
	sc := mustScan(t, iceberg.Opener{FS: fsys}, "iceberg:s3://lake/db/events/metadata/v3.metadata.json")
	if got := iceberg.Deletes([]iceberg.Input{{Scan: sc}}); len(got) != 1 || fmt.Sprint(got[first]) != "[1 4]" || sc.DeletedRows != 2 {
		t.Errorf("deletes over S3: %v (%d rows); want %s: [1 4]", got, sc.DeletedRows, first)
	}
}

func mustScan(t *testing.T, o iceberg.Opener, in string) *iceberg.Scan {
	t.Helper()
	sc, err := o.Scan(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}
