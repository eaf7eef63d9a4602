package daemon

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/lastmile/lastmile/asuser"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/objstore"
	"github.com/lastmile/lastmile/objstore/s3test"
)

func TestS3Allow(t *testing.T) {
	cfg := S3Config{Allow: []S3Grant{
		{Prefix: "s3://data/ctr/", Users: []string{"1001"}},
		{Prefix: "s3://data/shared/", Groups: []string{"2000"}},
		{Prefix: "s3://public", Users: []string{"1003"}},
	}}
	grants, err := cfg.grants()
	if err != nil {
		t.Fatal(err)
	}
	f := func(c asuser.Cred, url string, ok bool) {
		t.Helper()
		o, err := objstore.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		err = allowed(grants, c, o)
		if ok != (err == nil) {
			t.Fatalf("uid %d gid %d groups %v reads %s: %v, want allowed=%v", c.UID, c.GID, c.Groups, url, err, ok)
		}
		if err != nil && (!errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), url) || !strings.Contains(err.Error(), "s3.allow")) {
			t.Fatalf("refusal %q: want a permission error naming the object and s3.allow", err)
		}
	}
	alice, bob := asuser.Cred{UID: 1001, GID: 1001}, asuser.Cred{UID: 1002, GID: 1002, Groups: []uint32{2000}}
	f(alice, "s3://data/ctr/day=1/a.parquet", true)
	f(alice, "s3://data/ctr/", true)                  // listing the granted prefix
	f(alice, "s3://data/ctr-secret/a.parquet", false) // a sibling with the same start
	f(alice, "s3://data/", false)                     // listing above the grant
	f(alice, "s3://data/shared/a.parquet", false)
	f(bob, "s3://data/shared/a.parquet", true) // through a supplementary group
	f(bob, "s3://data/ctr/a.parquet", false)
	f(asuser.Cred{UID: 1003}, "s3://public/any/key.parquet", true) // the whole bucket
	f(asuser.Cred{UID: 0}, "s3://other/x.parquet", true)           // root: the daemon's rights
	f(asuser.Cred{UID: 1004}, "s3://data/ctr/a.parquet", false)

	for _, bad := range []S3Grant{
		{Prefix: "s3://data/ctr", Users: []string{"1001"}}, // no trailing '/'
		{Prefix: "/data/ctr/", Users: []string{"1001"}},
		{Prefix: "s3://data/ctr/"},
		{Prefix: "s3://data/ctr/", Users: []string{"no-such-user-lastmile"}},
	} {
		if _, err := (S3Config{Allow: []S3Grant{bad}}).grants(); err == nil {
			t.Errorf("grant %+v accepted", bad)
		}
	}
}

// TestS3ReaderFS: a user's job reads s3:// objects through the daemon's
// own credentials (its environment) within the grants, and is refused
// outside them before any request.
func TestS3ReaderFS(t *testing.T) {
	root := t.TempDir()
	srv, err := s3test.Start(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, dir := range []string{"data/ctr", "data/other"} {
		os.MkdirAll(filepath.Join(root, dir), 0o755)
		writeTinyParquet(t, filepath.Join(root, dir, "a.parquet"))
	}
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.Access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.Secret)
	cfg := DefaultConfig()
	cfg.S3 = S3Config{Endpoint: srv.Endpoint, PathStyle: true,
		Allow: []S3Grant{{Prefix: "s3://data/ctr/", Users: []string{"1001"}}}}
	d, err := New(cfg, nil, nil, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	alice := asuser.Cred{UID: 1001, GID: 1001}
	ctx := context.Background()
	p, err := decode.PlanFiles(ctx, []string{"s3://data/ctr/*.parquet"}, decode.PlanOptions{FS: d.readerFS(alice)})
	if err != nil || len(p.Files) != 1 || p.Rows != 3 {
		t.Fatalf("granted prefix: %v (%+v)", err, p)
	}
	if _, err := decode.PlanFiles(ctx, []string{"s3://data/other/a.parquet"}, decode.PlanOptions{FS: d.readerFS(alice)}); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("outside the grant: %v, want a permission error", err)
	}
	if _, err := decode.PlanFiles(ctx, []string{"s3://data/ctr/a.parquet"}, decode.PlanOptions{FS: d.readerFS(asuser.Cred{UID: 1002, GID: 1002})}); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("another user: %v, want a permission error", err)
	}
}

func writeTinyParquet(t *testing.T, path string) {
	t.Helper()
	type row struct {
		ID int64 `parquet:"id"`
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[row](&buf)
	if _, err := w.Write([]row{{1}, {2}, {3}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
