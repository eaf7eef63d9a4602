package objstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/objstore"
	"github.com/lastmile/lastmile/objstore/s3test"
)

// TestReplacedObjectReplannedAfterReplace: a Client lives as long as the
// daemon. An object replaced in the store (a dataset regenerated under the
// same key) must be read as it is now by the next job that plans it; the
// jobs that planned the old version may fail, the later ones may not.
// Before the fix, the Client's metaCache kept the old version forever
// (until 4096 other objects were opened), so every later plan read the
// new object with the old size and ETag: "file changed since it was
// planned" (412) or a range past its end (416), for every new job. Then,
// with the cache trusted for a minute, the first job within that minute
// still failed; planning now opens fresh (Source.OpenFresh).
func TestReplacedObjectReplannedAfterReplace(t *testing.T) {
	setup(t)
	ctx := context.Background()
	src := newSource(t, objstore.Config{})
	fsys := mount(src)
	// Written through the store (PUT), so that it has an ETag, as on AWS,
	// MinIO and Ceph.
	mc, err := minio.New(server.Addr, &minio.Options{Creds: credentials.NewStaticV4(s3test.Access, s3test.Secret, "")})
	if err != nil {
		t.Fatal(err)
	}
	put := func(rows int) {
		t.Helper()
		tmp := filepath.Join(t.TempDir(), "t.parquet")
		writeTable(t, tmp, rows)
		if _, err := mc.FPutObject(ctx, "data", "replaced/t.parquet", tmp, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	plan := func(i, rows int) (*decode.Plan, error) {
		p, err := decode.PlanFiles(ctx, []string{"s3://data/replaced/t.parquet"}, decode.PlanOptions{FS: fsys})
		if err == nil && p.Rows != int64(rows) {
			t.Fatalf("plan %d: %d rows, want the object's %d now", i, p.Rows, rows)
		}
		return p, err
	}
	// A second Client decodes the same plans, as a peer decodes units a
	// GPU host planned: it remembers each version from its last decode, so
	// its record is older than the next plan.
	other := mount(newSource(t, objstore.Config{}))
	for i, rows := range []int{30000, 1000, 2000} {
		put(rows)
		p, err := plan(i, rows)
		if err != nil {
			// Planning opens fresh: even right after the old version was
			// read, the next plan reads the object as it is now.
			t.Fatalf("plan %d, after the object was replaced by one of %d rows: %v", i, rows, err)
		}
		var got int64
		for _, b := range decodeAll(t, p) {
			got += int64(b.Rows)
		}
		if got != int64(rows) {
			t.Fatalf("plan %d: decoded %d rows, want %d", i, got, rows)
		}
		d := decode.NewDecoderFS(p.Fields, other)
		for _, u := range p.Units {
			var b column.Batch
			if err := d.Decode(ctx, u, &b); err != nil {
				t.Fatalf("plan %d, decoded by another client that read the old object: %v", i, err)
			}
		}
		d.Close()
	}
}
