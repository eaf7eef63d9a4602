package peer

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/objstore"
	"github.com/lastmile/lastmile/objstore/s3test"
	"github.com/lastmile/lastmile/roots"
	"github.com/lastmile/lastmile/spec"
)

// TestSideCheckOfAPrefixIsItsListing: the check of a side table named as
// a prefix of many objects costs its LIST (one request per 1,000 keys),
// whose entries carry each object's size and ETag, not a HEAD per object
// besides: and so it is made, within its timeout, against a store whose
// every request takes some time. Before, each of the prefix's objects
// was asked for with a HEAD of its own, one after the other: 60 HEADs
// (30,000 a minute per cached job for a table of 1,000 objects), and a
// check that never completed within sideCheckTimeout, so that the job
// was dropped and compiled again, its every object read again, each
// sideGrace.
func TestSideCheckOfAPrefixIsItsListing(t *testing.T) {
	const n = 60
	bucket := t.TempDir()
	srv, err := s3test.Start(context.Background(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	proxy, err := s3test.NewProxy(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	dir := filepath.Join(bucket, "data", "ctr", "side")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("p%03d.parquet", i)), []byte(strings.Repeat("x", 100+i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	client, err := objstore.New(objstore.Config{Endpoint: proxy.URL, PathStyle: true,
		AccessKey: s3test.Access, SecretKey: s3test.Secret, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	r, err := roots.New(map[string]string{"ctr": "s3://data/ctr"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	job, err := spec.Parse("", []byte(fmt.Sprintf("version: 1\nname: prefix\ninputs: [s3://data/in.parquet]\nbatch: {size: 10, last: keep}\nepochs: 1\nseed: 1\nring: {slots: 4, dir: %s}\npipeline:\n  - join: {kind: anti, table: ctr/side/, on: k}\n", t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}

	// The compile: the prefix listed, each of its objects opened.
	fsys := rootsFS{r: r, objects: client.Source(nil), user: Self()}
	fsys.side = newSideFiles(fsys, "")
	ctx := context.Background()
	if err := fsys.side.noteTables(ctx, job); err != nil {
		t.Fatal(err)
	}
	names, err := decode.ExpandInputs(ctx, fsys, []string{"ctr/side/"})
	if err != nil || len(names) != n {
		t.Fatalf("the prefix expands to %d objects (%v), want %d", len(names), err, n)
	}
	for _, name := range names {
		f, err := fsys.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	s := fsys.side
	s.seal()

	setSideRecheck(t, 0)
	oldTimeout := sideCheckTimeout
	sideCheckTimeout = 400 * time.Millisecond
	t.Cleanup(func() { sideCheckTimeout = oldTimeout })
	proxy.SetHang(10 * time.Millisecond) // each request takes 10 ms
	proxy.SetFaults(func(int64, *http.Request) s3test.Fault { return s3test.Hang })
	proxy.Reset()
	unchecked, err := s.fresh(ctx)
	if err != nil || unchecked != nil {
		t.Fatalf("the check of an unchanged prefix of %d objects: %v, %v; want it made, and good", n, unchecked, err)
	}
	if got := proxy.Requests(); got > 2 {
		t.Errorf("the check of an unchanged prefix of %d objects made %d requests, want its LIST: %v", n, got, proxy.Log()[:5])
	}

	// And it still sees an object replaced under its key.
	proxy.SetFaults(nil)
	time.Sleep(1100 * time.Millisecond) // another Last-Modified second
	if err := os.WriteFile(filepath.Join(dir, "p007.parquet"), []byte(strings.Repeat("y", 500)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.fresh(ctx); err == nil {
		t.Fatal("the check of a prefix one of whose objects was replaced kept the job")
	}
}
