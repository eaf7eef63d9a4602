package daemon

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/asuser"
	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/iceberg/icebergtest"
	"github.com/lastmile/lastmile/objstore/s3test"
)

// TestIcebergS3IndirectionChecked (a check that held, kept as a
// regression test): a table's metadata file in a prefix granted to the
// user, whose manifest list, manifests and data files lie in a prefix
// that is not, is refused naming the first object outside the grant; the
// same table read by a user granted both prefixes scans.
func TestIcebergS3IndirectionChecked(t *testing.T) {
	root := t.TempDir()
	srv, err := s3test.Start(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dir, err := srv.Bucket("data")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := icebergtest.New(filepath.Join(dir, "other", "events"), icebergtest.Layout{ByPart: true, URL: "s3://data/other/events"})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]icebergtest.Row, 40)
	for i := range rows {
		rows[i] = icebergtest.Row{ID: int64(i), Part: string(rune('a' + i%4))}
	}
	_, meta, err := tab.Append(rows)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "ctr"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "ctr", "v1.metadata.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.Access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.Secret)
	cfg := DefaultConfig()
	cfg.S3 = S3Config{Endpoint: srv.Endpoint, PathStyle: true, Allow: []S3Grant{
		{Prefix: "s3://data/ctr/", Users: []string{"1001", "1002"}},
		{Prefix: "s3://data/other/", Users: []string{"1002"}},
	}}
	d, err := New(cfg, nil, nil, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	in := "iceberg:s3://data/ctr/v1.metadata.json"
	_, err = iceberg.Opener{FS: d.readerFS(asuser.Cred{UID: 1001, GID: 1001})}.Scan(context.Background(), in)
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "s3://data/other/") {
		t.Fatalf("metadata in the grant, manifests outside it: %v; want a permission error naming the object outside", err)
	}
	sc, err := iceberg.Opener{FS: d.readerFS(asuser.Cred{UID: 1002, GID: 1002})}.Scan(context.Background(), in)
	if err != nil || len(sc.Files) != 4 {
		t.Fatalf("a user granted both: %v", err)
	}
}
