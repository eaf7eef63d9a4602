package engine_test

import (
	"bytes"
	"context"
	"net/http"
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

// runsFilter keeps 1,024 rows of every 8,192: of the 256-row pages of
// lateFetchData, most hold no kept row.
const runsFilter = "row_id % 8192 < 1024"

func lateFetchSpec(input, filter string) string {
	return strings.NewReplacer("INPUT", input, "FILTER", filter).Replace(lateFetchJob)
}

// lateFetchData writes 40,000 rows (8 row groups of 5,000, pages of 256
// rows) into dir and serves them from a started S3 test server's bucket
// "data", which it returns.
func lateFetchData(tb testing.TB, dir string) *s3test.Server {
	tb.Helper()
	cfg := datagen.DefaultConfig()
	cfg.Rows, cfg.Files, cfg.RowGroupRows, cfg.PageRows = 40_000, 1, 5_000, 256
	if _, err := datagen.Write(context.Background(), dir, cfg); err != nil {
		tb.Fatal(err)
	}
	srv, err := s3test.Start(context.Background(), tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	bucket, _ := srv.Bucket("data")
	files, _ := filepath.Glob(filepath.Join(dir, "*.parquet"))
	putObjects(tb, bucket, files)
	return srv
}

// lateFetchRun runs the job with filter over S3 at endpoint, deferring as
// the engine decides or (never) not at all, and returns its batches, the
// bytes and requests its client received and made, and its late pages.
func lateFetchRun(tb testing.TB, endpoint, filter string, never bool) ([][][]byte, objstore.Stats, engine.LatePages) {
	tb.Helper()
	defer engine.SetNeverDeferForTest(engine.SetNeverDeferForTest(never))
	c, err := objstore.New(objstore.Config{Endpoint: endpoint, PathStyle: true, AccessKey: s3test.Access, SecretKey: s3test.Secret})
	if err != nil {
		tb.Fatal(err)
	}
	var prog engine.Progress
	out := runTensorsWith(tb, lateFetchSpec("s3://data/*.parquet", filter), engine.Options{FS: objstore.Mount(nil, c.Source(nil)), Progress: &prog})
	return out, c.Stats(), prog.LatePages()
}

// TestS3LateFetchSkipsUnwantedPages: over S3, a filter that keeps rows
// in runs stops the late columns' unwanted pages from being fetched at
// all once the job has seen them go unread: the run receives far fewer
// bytes than the same run prefetching whole chunks, and its batches are
// byte-identical to it and to the local run's. A run keeping every row
// never defers.
func TestS3LateFetchSkipsUnwantedPages(t *testing.T) {
	dir := t.TempDir()
	srv := lateFetchData(t, dir)
	local := runTensors(t, lateFetchSpec(dir+"/*.parquet", runsFilter), nil)
	got, st, lp := lateFetchRun(t, srv.Endpoint, runsFilter, false)
	whole, stWhole, lpWhole := lateFetchRun(t, srv.Endpoint, runsFilter, true)
	_, _, lpAll := lateFetchRun(t, srv.Endpoint, "row_id >= 0", false)
	t.Logf("deferring: %+v, late pages %+v; whole chunks: %+v, %+v", st, lp, stWhole, lpWhole)
	if len(got[0]) == 0 || len(got[0]) != len(local[0]) || len(whole[0]) != len(local[0]) {
		t.Fatalf("%d batches deferring, %d whole, %d locally", len(got[0]), len(whole[0]), len(local[0]))
	}
	for i := range local[0] {
		if !bytes.Equal(got[0][i], local[0][i]) || !bytes.Equal(whole[0][i], local[0][i]) {
			t.Fatalf("batch %d differs over S3", i)
		}
	}
	// Three of the four columns are late; about 4 of 5 of their pages go
	// unread, and deferring starts with the third unit (the second was
	// announced whole before the first was seen).
	if float64(st.Bytes) > 0.6*float64(stWhole.Bytes) {
		t.Errorf("deferring received %d bytes, prefetching whole chunks %d: the unwanted pages were fetched", st.Bytes, stWhole.Bytes)
	}
	if !lp.Deferred || lp.PagesUnread <= 2*lp.Pages || lp.BytesUnread == 0 || lpWhole.Deferred {
		t.Errorf("late pages %+v deferring, %+v never deferring; want the first deferred with most pages unread", lp, lpWhole)
	}
	if lpAll.Deferred || lpAll.PagesUnread != 0 || lpAll.Pages == 0 {
		t.Errorf("keeping every row: late pages %+v; want all read, not deferred", lpAll)
	}
}

// BenchmarkS3LateFetch times the runs filter over S3 behind a proxy
// that holds every request 20 ms (a remote store's first byte), with the
// late columns prefetched whole and deferred to the pages wanted: what
// deferring costs in latency against what it saves in bytes.
func BenchmarkS3LateFetch(b *testing.B) {
	srv := lateFetchData(b, b.TempDir())
	proxy, err := s3test.NewProxy(srv.Endpoint)
	if err != nil {
		b.Fatal(err)
	}
	defer proxy.Close()
	proxy.SetHang(20 * time.Millisecond)
	proxy.SetFaults(func(int64, *http.Request) s3test.Fault { return s3test.Hang })
	for _, never := range []bool{true, false} {
		b.Run(map[bool]string{true: "whole", false: "deferred"}[never], func(b *testing.B) {
			var st objstore.Stats
			for b.Loop() {
				_, s, _ := lateFetchRun(b, proxy.URL, runsFilter, never)
				st.Bytes += s.Bytes
				st.Requests += s.Requests
			}
			b.ReportMetric(float64(st.Bytes)/float64(b.N)/1e6, "MB/op")
			b.ReportMetric(float64(st.Requests)/float64(b.N), "requests/op")
		})
	}
}
