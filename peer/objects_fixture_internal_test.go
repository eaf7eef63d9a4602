package peer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/lastmile/lastmile/objstore"
	"github.com/lastmile/lastmile/objstore/s3test"
	"github.com/lastmile/lastmile/roots"
)

// s3Bucket starts a test S3 server whose bucket "data" holds the
// fixture's files, part i under data/dirs[i], and returns a client of it
// and the roots {ctr: s3://data/ctr}; both go with the test. The
// bucket's directory on disk is f.bucket.
func (f *fixture) s3Bucket(t *testing.T, dirs ...string) (*objstore.Client, *roots.Roots) {
	t.Helper()
	bucket := t.TempDir()
	f.bucket = bucket
	srv, err := s3test.Start(context.Background(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	for i, dir := range dirs {
		name := fmt.Sprintf("part-%05d.parquet", i)
		b, err := os.ReadFile(filepath.Join(f.data, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(bucket, "data", dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bucket, "data", dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	client, err := objstore.New(objstore.Config{Endpoint: srv.Endpoint, PathStyle: true,
		AccessKey: s3test.Access, SecretKey: s3test.Secret})
	if err != nil {
		t.Fatal(err)
	}
	r, err := roots.New(map[string]string{"ctr": "s3://data/ctr"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return client, r
}
