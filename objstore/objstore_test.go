package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/objstore"
	"github.com/lastmile/lastmile/objstore/s3test"
)

// One server (and one proxy in front of it) for the package's tests,
// started by the first test that needs it (fuzzing needs none).
var (
	server   *s3test.Server
	proxy    *s3test.Proxy
	bucket   string // the bucket's directory
	root     string
	once     sync.Once
	setupErr error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if proxy != nil {
		proxy.Close()
	}
	if server != nil {
		server.Close()
	}
	if root != "" {
		os.RemoveAll(root)
	}
	os.Exit(code)
}

// setup starts the server and the proxy once.
func setup(t testing.TB) {
	t.Helper()
	once.Do(func() {
		if root, setupErr = os.MkdirTemp("", "objstore-test"); setupErr != nil {
			return
		}
		t0 := time.Now()
		if server, setupErr = s3test.Start(context.Background(), root); setupErr != nil {
			return
		}
		if d := time.Since(t0); d > 10*time.Second {
			fmt.Fprintf(os.Stderr, "objstore: built and started the S3 test server in %v\n", d.Round(time.Second))
		}
		if bucket, setupErr = server.Bucket("data"); setupErr != nil {
			return
		}
		proxy, setupErr = s3test.NewProxy(server.Endpoint)
	})
	if setupErr != nil {
		t.Fatal(setupErr)
	}
}

type row struct {
	ID  int64   `parquet:"id"`
	A   int64   `parquet:"a"`
	B   float64 `parquet:"b"`
	C   []int32 `parquet:"c,list"`
	Tag string  `parquet:"tag"`
}

// writeTable writes rows rows in row groups of 20,000, uncompressed so
// that every column chunk is far larger than the coalescing gap.
func writeTable(t testing.TB, path string, rows int, opts ...parquet.WriterOption) {
	t.Helper()
	var buf bytes.Buffer
	opts = append(opts, parquet.Compression(&parquet.Uncompressed), parquet.MaxRowsPerRowGroup(20000))
	w := parquet.NewGenericWriter[row](&buf, opts...)
	rs := make([]row, rows)
	for i := range rs {
		rs[i] = row{ID: int64(i), A: int64(i) * 7, B: float64(i) / 3, C: []int32{int32(i), int32(i % 5)}, Tag: fmt.Sprintf("t%d", i%97)}
	}
	if _, err := w.Write(rs); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// newSource returns a source reading through the proxy.
func newSource(t testing.TB, cfg objstore.Config) *objstore.Source {
	t.Helper()
	if cfg.Endpoint == "" {
		cfg.Endpoint = proxy.URL
	}
	if cfg.AccessKey == "" {
		cfg.AccessKey, cfg.SecretKey = s3test.Access, s3test.Secret
	}
	cfg.PathStyle = true
	c, err := objstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c.Source(nil)
}

func mount(src *objstore.Source) decode.FS {
	return decode.WithSchemes(nil, map[string]decode.FS{objstore.Scheme: src})
}

// decodeAll decodes every unit of plan, one batch per unit.
func decodeAll(t testing.TB, plan *decode.Plan) []column.Batch {
	t.Helper()
	d := plan.NewDecoder()
	defer d.Close()
	var out []column.Batch
	for _, u := range plan.Units {
		var b column.Batch
		if err := d.Decode(context.Background(), u, &b); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func sameBatches(t testing.TB, got, want []column.Batch) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d batches, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := &got[i], &want[i]
		if g.Rows != w.Rows || len(g.Columns) != len(w.Columns) {
			t.Fatalf("batch %d: %d rows %d columns, want %d and %d", i, g.Rows, len(g.Columns), w.Rows, len(w.Columns))
		}
		for j := range w.Columns {
			gc, wc := &g.Columns[j], &w.Columns[j]
			if gc.Name != wc.Name || gc.Len != wc.Len || !bytes.Equal(gc.Data[:len(wc.Data)], wc.Data) ||
				!slices.Equal(gc.Offsets, wc.Offsets) || !bytes.Equal(gc.Valid, wc.Valid) {
				t.Fatalf("batch %d column %s differs from the local decode", i, wc.Name)
			}
		}
	}
}

// TestSameBatchesAsLocal: a job over s3:// inputs (a glob) decodes to
// batches byte-identical to the same job over the local files.
func TestSameBatchesAsLocal(t *testing.T) {
	setup(t)
	for _, name := range []string{"same/p=1/a.parquet", "same/p=1/b.parquet", "same/p=2/c.parquet"} {
		writeTable(t, filepath.Join(bucket, name), 45000)
	}
	os.WriteFile(filepath.Join(bucket, "same/p=1/notes.txt"), []byte("not parquet"), 0o644)
	ctx := context.Background()
	local, err := decode.PlanFiles(ctx, []string{filepath.Join(bucket, "same/p=*/*.parquet")}, decode.PlanOptions{MaxUnitRows: 8000})
	if err != nil {
		t.Fatal(err)
	}
	src := newSource(t, objstore.Config{})
	for _, in := range []string{"s3://data/same/p=*/*.parquet", "s3://data/same/", "s3://data/same"} {
		remote, err := decode.PlanFiles(ctx, []string{in}, decode.PlanOptions{MaxUnitRows: 8000, FS: mount(src)})
		if err != nil {
			t.Fatal(err)
		}
		if len(remote.Files) != 3 || remote.Files[0].Path != "s3://data/same/p=1/a.parquet" || remote.Rows != local.Rows {
			t.Fatalf("%s: planned %d files (%+v), %d rows; want the 3 local ones, %d rows", in, len(remote.Files), remote.Files, remote.Rows, local.Rows)
		}
		sameBatches(t, decodeAll(t, remote), decodeAll(t, local))
	}
}

// TestProjectedBytes: a projected job fetches its columns' chunks and the
// footer's tail and nothing else, and the footer costs one request (two
// when it is longer than the first tail read).
func TestProjectedBytes(t *testing.T) {
	setup(t)
	path := filepath.Join(bucket, "proj/t.parquet")
	writeTable(t, path, 60000)
	st, _ := os.Stat(path)
	ctx := context.Background()
	src := newSource(t, objstore.Config{})
	proxy.Reset()
	plan, err := decode.PlanFiles(ctx, []string{"s3://data/proj/t.parquet"}, decode.PlanOptions{Columns: []string{"id", "c"}, FS: mount(src)})
	if err != nil {
		t.Fatal(err)
	}
	if n := proxy.Requests(); n != 1 {
		t.Fatalf("planning made %d requests (%q), want 1 for the footer", n, proxy.Log())
	}
	decodeAll(t, plan)
	// The tail planning's Open fetched, and the projected chunks, which the
	// decoder's file (opened later, from the version cache, without the
	// tail's bytes) fetches whole.
	tail := min(st.Size(), 64<<10)
	var projected int64
	for _, u := range plan.Units {
		for _, c := range u.Chunks {
			projected += c.End - c.Offset
		}
	}
	want := tail + projected
	if got := proxy.Bytes(); got != want {
		t.Fatalf("fetched %d bytes, want %d (the footer tail and the projected chunks, %d bytes) of a %d-byte file", got, want, projected, st.Size())
	}
	if want > st.Size()*6/10 {
		t.Fatalf("projection of 2 of 5 columns still needs %d of %d bytes: the test data does not test projection", want, st.Size())
	}
	t.Logf("fetched %d of %d bytes (%.0f%%) in %d requests", want, st.Size(), 100*float64(want)/float64(st.Size()), proxy.Requests())

	// A footer longer than the first tail read: two requests.
	writeTable(t, filepath.Join(bucket, "proj/bigfooter.parquet"), 1000, parquet.KeyValueMetadata("notes", strings.Repeat("x", 100<<10)))
	proxy.Reset()
	if _, err := decode.PlanFiles(ctx, []string{"s3://data/proj/bigfooter.parquet"}, decode.PlanOptions{FS: mount(newSource(t, objstore.Config{}))}); err != nil {
		t.Fatal(err)
	}
	if n := proxy.Requests(); n != 2 {
		t.Fatalf("planning a file with a 100 KiB footer made %d requests (%q), want 2", n, proxy.Log())
	}
}

// TestErrors: 404, 403 and truncated objects are clear errors naming the
// object; an unknown bucket too.
func TestErrors(t *testing.T) {
	setup(t)
	writeTable(t, filepath.Join(bucket, "errs/ok.parquet"), 1000)
	ctx := context.Background()
	plan := func(src *objstore.Source, in string) error {
		_, err := decode.PlanFiles(ctx, []string{in}, decode.PlanOptions{FS: mount(src)})
		return err
	}
	good := newSource(t, objstore.Config{})
	err := plan(good, "s3://data/errs/missing.parquet")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "s3://data/errs/missing.parquet") {
		t.Errorf("missing object: %v; want ErrNotExist naming it", err)
	}
	t.Logf("missing: %v", err)
	src := newSource(t, objstore.Config{})
	if _, err := src.Open("s3://data/errs/missing.parquet"); !errors.Is(err, objstore.ErrNotFound) || !strings.Contains(err.Error(), "404") {
		t.Errorf("open a missing object: %v; want ErrNotFound (404)", err)
	}
	if _, err := src.Open("s3://nobucket/x.parquet"); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "s3://nobucket/x.parquet") {
		t.Errorf("open in a missing bucket: %v", err)
	}
	bad := newSource(t, objstore.Config{AccessKey: s3test.Access, SecretKey: "wrong"})
	err = plan(bad, "s3://data/errs/ok.parquet")
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "s3://data/errs/ok.parquet") || !strings.Contains(err.Error(), "credentials") {
		t.Errorf("wrong secret: %v; want a permission error naming the object and the credentials", err)
	}
	t.Logf("wrong secret: %v", err)
	if err := plan(bad, "s3://data/errs/*.parquet"); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("list with a wrong secret: %v; want a permission error", err)
	}

	// Truncated before planning: not a Parquet file any more.
	b, _ := os.ReadFile(filepath.Join(bucket, "errs/ok.parquet"))
	os.WriteFile(filepath.Join(bucket, "errs/cut.parquet"), b[:len(b)/2], 0o644)
	err = plan(good, "s3://data/errs/cut.parquet")
	if !errors.Is(err, decode.ErrCorrupt) || !strings.Contains(err.Error(), "s3://data/errs/cut.parquet") || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("truncated object: %v; want a corrupt error naming it", err)
	}
	t.Logf("truncated: %v", err)
}

// TestTruncatedAfterPlanning: an object cut short after it was planned
// fails its next read with an error naming it, not with wrong rows.
func TestTruncatedAfterPlanning(t *testing.T) {
	setup(t)
	path := filepath.Join(bucket, "trunc/t.parquet")
	writeTable(t, path, 45000)
	src := newSource(t, objstore.Config{PrefetchBytes: -1})
	p, err := decode.PlanFiles(context.Background(), []string{"s3://data/trunc/t.parquet"}, decode.PlanOptions{FS: mount(src)})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, b[:len(b)/3], 0o644); err != nil {
		t.Fatal(err)
	}
	d := p.NewDecoder()
	defer d.Close()
	var batch column.Batch
	u := p.Units[len(p.Units)-1]
	err = d.Decode(context.Background(), u, &batch)
	if err == nil || !strings.Contains(err.Error(), "s3://data/trunc/t.parquet") ||
		!(errors.Is(err, objstore.ErrTruncated) || errors.Is(err, decode.ErrFileChanged)) {
		t.Fatalf("decode after truncation: %v; want ErrTruncated or ErrFileChanged naming the object", err)
	}
	t.Logf("truncated after planning: %v", err)
}

// TestRetries: injected 503s, a hung request and a body cut short are
// retried and the read succeeds; a store that keeps failing gives up with
// an error that says so.
func TestRetries(t *testing.T) {
	setup(t)
	path := filepath.Join(bucket, "retry/t.parquet")
	writeTable(t, path, 30000)
	ctx := context.Background()
	want := func() []column.Batch {
		p, err := decode.PlanFiles(ctx, []string{path}, decode.PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return decodeAll(t, p)
	}()
	defer proxy.SetFaults(nil)
	cases := []struct {
		desc  string
		fault func(n int64, r *http.Request) s3test.Fault
	}{
		{"two 503 SlowDown", func(n int64, r *http.Request) s3test.Fault {
			if n <= 2 {
				return s3test.Status503
			}
			return s3test.Pass
		}},
		{"a request that hangs past the timeout", func(n int64, r *http.Request) s3test.Fault {
			if n == 1 {
				return s3test.Hang
			}
			return s3test.Pass
		}},
		{"a body cut in half", func(n int64, r *http.Request) s3test.Fault {
			if n == 2 {
				return s3test.Truncate
			}
			return s3test.Pass
		}},
	}
	for _, c := range cases {
		src := newSource(t, objstore.Config{RequestTimeout: 300 * time.Millisecond, RetryBase: time.Millisecond, PrefetchBytes: -1})
		proxy.Reset()
		proxy.SetHang(3 * time.Second)
		proxy.SetFaults(c.fault)
		p, err := decode.PlanFiles(ctx, []string{"s3://data/retry/t.parquet"}, decode.PlanOptions{FS: mount(src)})
		if err != nil {
			t.Fatalf("%s: plan: %v", c.desc, err)
		}
		sameBatches(t, decodeAll(t, p), want)
		if st := src.Client().Stats(); st.Retries == 0 {
			t.Errorf("%s: no retry counted (%+v; proxy log %q)", c.desc, st, proxy.Log())
		}
	}

	proxy.Reset()
	proxy.SetFaults(func(int64, *http.Request) s3test.Fault { return s3test.Status503 })
	src := newSource(t, objstore.Config{Retries: 2, RetryBase: time.Millisecond})
	_, err := src.Open("s3://data/retry/t.parquet")
	if err == nil || !strings.Contains(err.Error(), "SlowDown") || !strings.Contains(err.Error(), "gave up after 3 attempts") ||
		!strings.Contains(err.Error(), "s3://data/retry/t.parquet") {
		t.Fatalf("a store that keeps answering 503: %v", err)
	}
	t.Logf("keeps failing: %v", err)
	if n := proxy.Requests(); n != 3 {
		t.Fatalf("%d requests for 1 try and 2 retries", n)
	}
}

// TestPrefetchBudget: with a budget too small for any block, reads still
// succeed (on demand), and the budget is whole again once files close.
func TestPrefetchBudget(t *testing.T) {
	setup(t)
	writeTable(t, filepath.Join(bucket, "budget/t.parquet"), 45000)
	ctx := context.Background()
	for _, budget := range []int64{1, 256 << 20} {
		src := newSource(t, objstore.Config{PrefetchBytes: budget})
		p, err := decode.PlanFiles(ctx, []string{"s3://data/budget/t.parquet"}, decode.PlanOptions{Columns: []string{"a", "tag"}, FS: mount(src)})
		if err != nil {
			t.Fatal(err)
		}
		decodeAll(t, p)
		if n := src.Client().PrefetchInUse(); n != 0 {
			t.Fatalf("budget %d: %d bytes still held after the decoder closed its files", budget, n)
		}
	}
}

// TestPrefetchUnitAhead: units announced before any decoder opens them
// (what the engine does for the unit a worker takes next) are fetched in
// the background, within the budget, and their decoders then make no
// request of their own.
func TestPrefetchUnitAhead(t *testing.T) {
	setup(t)
	writeTable(t, filepath.Join(bucket, "ahead/t.parquet"), 60000)
	ctx := context.Background()
	const budget = 8 << 20
	src := newSource(t, objstore.Config{PrefetchBytes: budget})
	fsys := mount(src)
	plan, err := decode.PlanFiles(ctx, []string{"s3://data/ahead/t.parquet"}, decode.PlanOptions{Columns: []string{"id", "c"}, FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for i := range plan.Units {
		for _, c := range plan.Units[i].Chunks {
			want += c.End - c.Offset
		}
		decode.PrefetchUnit(fsys, &plan.Units[i], nil)
	}
	if n := src.Client().PrefetchInUse(); n <= 0 || n > budget {
		t.Fatalf("%d bytes prefetched after announcing the units, want some and at most the budget %d", n, budget)
	}
	base := src.Client().Stats().Bytes
	deadline := time.Now().Add(10 * time.Second)
	for src.Client().Stats().Bytes-base < want-64<<10 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	proxy.Reset()
	decodeAll(t, plan)
	if n := proxy.Requests(); n > 1 { // the last unit's part in the tail the planner's file held
		t.Fatalf("decoding announced units made %d requests (%q), want at most 1", n, proxy.Log())
	}
	if n := src.Client().PrefetchInUse(); n != 0 {
		t.Fatalf("%d prefetched bytes still held after every unit was decoded", n)
	}
}

// TestCancelStopsRead: cancelling the job's context stops a read the
// store hangs on, instead of waiting out its timeout and retries.
func TestCancelStopsRead(t *testing.T) {
	setup(t)
	writeTable(t, filepath.Join(bucket, "cancel/t.parquet"), 30000)
	src := newSource(t, objstore.Config{RequestTimeout: time.Minute, PrefetchBytes: -1})
	p, err := decode.PlanFiles(context.Background(), []string{"s3://data/cancel/t.parquet"}, decode.PlanOptions{FS: mount(src)})
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetHang(time.Minute)
	proxy.SetFaults(func(int64, *http.Request) s3test.Fault { return s3test.Hang })
	defer proxy.SetFaults(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	d := p.NewDecoder()
	defer d.Close()
	var b column.Batch
	t0 := time.Now()
	err = d.Decode(ctx, p.Units[0], &b)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > 5*time.Second {
		t.Fatalf("decode of a hung store under a 200ms context: %v after %v", err, time.Since(t0))
	}
}

// TestStatContextGivesUp: a HEAD the store hangs on ends when its
// context does, retries included: a peer checking a cached job's side
// tables must not wait out the store's timeouts.
func TestStatContextGivesUp(t *testing.T) {
	setup(t)
	writeTable(t, filepath.Join(bucket, "statctx/t.parquet"), 10)
	src := newSource(t, objstore.Config{RequestTimeout: time.Minute, PrefetchBytes: -1})
	fi, err := src.StatContext(context.Background(), "s3://data/statctx/t.parquet")
	if err != nil || fi.Size() == 0 || fi.Sys() == nil {
		t.Fatalf("StatContext: %v, %v", fi, err)
	}
	proxy.SetHang(time.Minute)
	proxy.SetFaults(func(int64, *http.Request) s3test.Fault { return s3test.Hang })
	defer proxy.SetFaults(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err = src.StatContext(ctx, "s3://data/statctx/t.parquet")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > 5*time.Second {
		t.Fatalf("StatContext of a hung store under a 200ms context: %v after %v", err, time.Since(t0))
	}
}

// TestListStatIsWhatOpenSaw: a listing's entries give each object's
// size and ETag as an Open's GET (and a HEAD) does, and its Last-Modified
// to the same second: what a peer checks a cached job's prefix side
// table by, with one LIST instead of a HEAD per object.
func TestListStatIsWhatOpenSaw(t *testing.T) {
	setup(t)
	writeTable(t, filepath.Join(bucket, "liststat/a.parquet"), 10)
	writeTable(t, filepath.Join(bucket, "liststat/b.parquet"), 20)
	src := newSource(t, objstore.Config{PrefetchBytes: -1})
	names, infos, err := src.ListStat(context.Background(), "s3://data/liststat/")
	if err != nil || len(names) != 2 || len(infos) != 2 {
		t.Fatalf("ListStat: %v, %v, %v", names, infos, err)
	}
	for i, name := range names {
		f, err := src.OpenFresh(name)
		if err != nil {
			t.Fatal(err)
		}
		opened, _ := f.Stat()
		f.Close()
		head, err := src.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		l := infos[i]
		if l.Size() != opened.Size() || l.Sys() != opened.Sys() || head.Sys() != opened.Sys() ||
			!l.ModTime().Truncate(time.Second).Equal(opened.ModTime().Truncate(time.Second)) {
			t.Errorf("%s listed as %d, %v, %q; opened as %d, %v, %q; HEAD %q", name,
				l.Size(), l.ModTime(), l.Sys(), opened.Size(), opened.ModTime(), opened.Sys(), head.Sys())
		}
	}
}
