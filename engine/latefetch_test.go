package engine_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/datagen"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/objstore"
	"github.com/lastmile/lastmile/objstore/s3test"
)

const lateFetchJob = `
version: 1
name: latefetch
inputs: [INPUT]
columns: [row_id, dense_0, seq_0, seq_1]
batch: {size: 128, last: keep}
decode: {workers: 1}
pipeline:
  - filter: "FILTER"
ring: {dir: RINGDIR, slots: 4}
`

// TestS3LateFetchSkipsUnwantedPages: over S3, a filter that keeps rows
// in runs (1,024 of every 8,192, about 7 of 8 pages of 256 rows unread)
// stops the late columns' unwanted pages from being fetched at all once
// the job has seen them go unread: the run receives far fewer bytes than
// the same job keeping every row, and its batches are byte-identical to
// the local run's.
func TestS3LateFetchSkipsUnwantedPages(t *testing.T) {
	dir := t.TempDir()
	cfg := datagen.DefaultConfig()
	cfg.Rows, cfg.Files, cfg.RowGroupRows, cfg.PageRows = 40_000, 1, 5_000, 256
	if _, err := datagen.Write(context.Background(), dir, cfg); err != nil {
		t.Fatal(err)
	}
	srv, err := s3test.Start(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	bucket, _ := srv.Bucket("data")
	files, _ := filepath.Glob(filepath.Join(dir, "*.parquet"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bucket, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	job := func(input, filter string) string {
		return strings.NewReplacer("INPUT", input, "FILTER", filter).Replace(lateFetchJob)
	}
	remote := func(filter string) ([][][]byte, int64, engine.LatePages) {
		c, err := objstore.New(objstore.Config{Endpoint: srv.Endpoint, PathStyle: true, AccessKey: s3test.Access, SecretKey: s3test.Secret})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var prog engine.Progress
		out := runTensorsWith(t, job("s3://data/*.parquet", filter), engine.Options{FS: objstore.Mount(nil, c.Source(nil)), Progress: &prog})
		t.Logf("filter %q over S3: %v, %d bytes received in %d requests; late pages %+v", filter, time.Since(start).Round(time.Millisecond), c.Stats().Bytes, c.Stats().Requests, prog.LatePages())
		return out, c.Stats().Bytes, prog.LatePages()
	}
	const runs = "row_id % 8192 < 1024"
	local := runTensors(t, job(dir+"/*.parquet", runs), nil)
	got, skipping, lp := remote(runs)
	_, all, lpAll := remote("row_id >= 0")
	if !lp.Deferred || lp.PagesUnread <= 2*lp.Pages || lp.BytesUnread == 0 {
		t.Errorf("keeping rows in runs: late pages %+v; want deferred, most of them unread", lp)
	}
	if lpAll.Deferred || lpAll.PagesUnread != 0 || lpAll.Pages == 0 {
		t.Errorf("keeping every row: late pages %+v; want all read, not deferred", lpAll)
	}
	if len(got[0]) == 0 || len(got[0]) != len(local[0]) {
		t.Fatalf("%d batches over S3, %d locally", len(got[0]), len(local[0]))
	}
	for i := range local[0] {
		if !bytes.Equal(got[0][i], local[0][i]) {
			t.Fatalf("batch %d differs over S3", i)
		}
	}
	// Three of the four columns are late; about 7/8 of their pages go
	// unread, and deferring starts with the third unit (the second was
	// announced whole before the first was seen).
	if float64(skipping) > 0.6*float64(all) {
		t.Errorf("the run keeping 1/8 of the rows in runs received %d bytes, the run keeping all %d: its unwanted pages were fetched", skipping, all)
	}
}
