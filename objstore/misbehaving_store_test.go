package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/parquet-go/parquet-go"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/objstore"
	"github.com/lastmile/lastmile/objstore/s3test"
)

// rangeStore answers GETs of the test bucket from the bucket's files as a
// store (or a cache in front of one) that honours Range but may answer a
// range other than the one asked for: answer maps the asked range [off,
// end] (end inclusive; off < 0 is a suffix range of -off bytes) of a
// size-byte object to the range it sends, with a 206 whose Content-Range
// says which. Other requests go to the real store.
type rangeStore struct {
	dir    string
	answer func(off, end, size int64) (int64, int64)
	later  string // the ETag of answers to ranges that are not a suffix ("": the same as a suffix's, "v1")
}

func (t rangeStore) RoundTrip(r *http.Request) (*http.Response, error) {
	rg, ok := strings.CutPrefix(r.Header.Get("Range"), "bytes=")
	if r.Method != http.MethodGet || !ok {
		return http.DefaultTransport.RoundTrip(r)
	}
	b, err := os.ReadFile(filepath.Join(t.dir, strings.TrimPrefix(r.URL.Path, "/data/")))
	if err != nil {
		return http.DefaultTransport.RoundTrip(r)
	}
	size := int64(len(b))
	a, z, _ := strings.Cut(rg, "-")
	var off, end int64
	if a == "" {
		n, _ := strconv.ParseInt(z, 10, 64)
		off, end = -n, size-1
	} else {
		off, _ = strconv.ParseInt(a, 10, 64)
		end, _ = strconv.ParseInt(z, 10, 64)
	}
	s, e := t.answer(off, end, size)
	h := http.Header{}
	h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", s, e, size))
	h.Set("Content-Length", strconv.FormatInt(e-s+1, 10))
	h.Set("Last-Modified", "Sun, 29 Nov 2026 12:00:00 GMT")
	h.Set("ETag", `"v1"`)
	if off >= 0 && t.later != "" {
		h.Set("ETag", `"`+t.later+`"`)
	}
	h.Set("Content-Type", "application/octet-stream")
	return &http.Response{StatusCode: 206, Status: "206 Partial Content", Header: h, Body: io.NopCloser(bytes.NewReader(b[s : e+1])),
		ContentLength: e - s + 1, Request: r, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

// honest answers a range as asked.
func honest(off, end, size int64) (int64, int64) {
	if off < 0 {
		return max(size+off, 0), end
	}
	return off, min(end, size-1)
}

// TestRangeAnsweredFromAnotherOffset: a ranged GET answered with a
// 206 for a range that starts elsewhere (here: a cache that serves
// 64 KiB-aligned pieces, and says so in Content-Range) is read as if it
// started where it was asked. The reader gets the bytes of another offset
// with no error: silently wrong column data. RFC 9110 leaves it to the
// client to check a 206's Content-Range; File.get never looks at it past
// "is it there".
func TestRangeAnsweredFromAnotherOffset(t *testing.T) {
	setup(t)
	path := filepath.Join(bucket, "rv-shift/t.parquet")
	writeTable(t, path, 30000)
	want, _ := os.ReadFile(path)
	aligned := func(off, end, size int64) (int64, int64) {
		if off < 0 {
			return honest(off, end, size)
		}
		return off &^ (64<<10 - 1), min(end, size-1)
	}
	src := newSource(t, objstore.Config{Endpoint: server.Endpoint, Transport: rangeStore{dir: bucket, answer: aligned}, PrefetchBytes: -1})
	f, err := src.Open("s3://data/rv-shift/t.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const off = 70000
	p := make([]byte, 100)
	_, err = f.ReadAt(p, off)
	if err == nil && !bytes.Equal(p, want[off:off+100]) {
		i := bytes.Index(want, p)
		t.Fatalf("ReadAt(100 bytes at %d) answered by a 206 for bytes %d-...: no error, and the bytes returned are those at offset %d of the object", off, off&^(64<<10-1), i)
	}
	t.Logf("err=%v", err)
}

// TestTailAnsweredFromTheStart: Open's suffix GET ("bytes=-65536")
// answered with a 206 for the object's FIRST 64 KiB (a store or proxy
// that misreads a suffix range, and says so in Content-Range: "bytes
// 0-65535/size") is kept as the object's last 64 KiB. Every read of the
// object's end then returns bytes from its start, with no error.
func TestTailAnsweredFromTheStart(t *testing.T) {
	setup(t)
	path := filepath.Join(bucket, "rv-tail/t.parquet")
	writeTable(t, path, 30000)
	want, _ := os.ReadFile(path)
	head := func(off, end, size int64) (int64, int64) {
		if off < 0 {
			return 0, -off - 1
		}
		return honest(off, end, size)
	}
	src := newSource(t, objstore.Config{Endpoint: server.Endpoint, Transport: rangeStore{dir: bucket, answer: head}, PrefetchBytes: -1})
	f, err := src.Open("s3://data/rv-tail/t.parquet")
	if err != nil {
		t.Logf("open refused: %v", err)
		return // refusing is right
	}
	defer f.Close()
	p := make([]byte, 8)
	n := int64(len(want))
	_, err = f.ReadAt(p, n-8)
	if err == nil && !bytes.Equal(p, want[n-8:]) {
		t.Fatalf("the last 8 bytes read as %q, want %q: the tail Open kept is the object's first 64 KiB (Content-Range %q ignored)", p, want[n-8:], fmt.Sprintf("bytes 0-65535/%d", n))
	}
}

// putObject writes a table of rows rows as key through the store (PUT),
// so that it has an ETag.
func putObject(t *testing.T, key string, rows int) {
	t.Helper()
	mc, err := minio.New(server.Addr, &minio.Options{Creds: credentials.NewStaticV4(s3test.Access, s3test.Secret, "")})
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(t.TempDir(), "t.parquet")
	writeTable(t, tmp, rows)
	if _, err := mc.FPutObject(context.Background(), "data", key, tmp, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitBytes waits until c has received at least n more bytes than base.
func waitBytes(t *testing.T, c *objstore.Client, base, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().Bytes-base < n {
		if time.Now().After(deadline) {
			t.Fatalf("prefetch did not arrive: %d of %d bytes", c.Stats().Bytes-base, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestNoETagPrefetchServesOldVersion: with a store that gives no
// ETag (versitygw serving files written to its directory; docs/storage.md
// names it), prefetched blocks are matched to readers by ETag alone, so a
// block of the object's previous version ("" too) serves a reader of the
// current one. A job that planned the object after it was replaced (fresh:
// right size and Last-Modified) reads the previous version's bytes, with
// no error. The block came from an earlier job's prefetch (a unit
// announced and never decoded, a cancelled job) less than 30 s before.
func TestNoETagPrefetchServesOldVersion(t *testing.T) {
	setup(t)
	path := filepath.Join(bucket, "rv-noetag/t.parquet")
	name := "s3://data/rv-noetag/t.parquet"
	writeTable(t, path, 60000)
	src := newSource(t, objstore.Config{})
	c := src.Client()
	f1, err := src.OpenFresh(name)
	if err != nil {
		t.Fatal(err)
	}
	if etag, _ := mustStat(t, f1).Sys().(string); etag != "" {
		t.Skipf("the store gave an ETag (%q) to a file written behind its back", etag)
	}
	const n = 256 << 10
	base := c.Stats().Bytes
	f1.(*objstore.File).Prefetch([]decode.Range{{Off: 4, Len: n}})
	waitBytes(t, c, base, n)
	f1.Close()

	// The object is replaced: other bytes, another size and mtime.
	old, _ := os.ReadFile(path)
	want := bytes.Clone(old)
	for i := range 300 << 10 {
		want[i] ^= 0xff
	}
	want = append(want, make([]byte, 1000)...)
	os.WriteFile(path, want, 0o644)
	os.Chtimes(path, time.Now().Add(time.Hour), time.Now().Add(time.Hour))

	f2, err := src.OpenFresh(name) // what the next job's planner does
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	if st := mustStat(t, f2); st.Size() != int64(len(want)) {
		t.Fatalf("fresh open: size %d, want %d", st.Size(), len(want))
	}
	p := make([]byte, 4096)
	if _, err := f2.ReadAt(p, 100000); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p, want[100000:100000+len(p)]) {
		t.Fatalf("a reader of the object as it is now (opened fresh, size %d) got other bytes than the store holds (those of its previous version: %v), from a prefetched block", len(want), bytes.Equal(p, old[100000:100000+len(p)]))
	}
}

func mustStat(t *testing.T, f decode.File) interface {
	Size() int64
	Sys() any
} {
	t.Helper()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestNoETagReplacedSameSize: docs/storage.md: "Stores that return
// no ETag ... are checked by size and Last-Modified only." Reads carry no
// condition at all when there is no ETag (no If-Unmodified-Since), and
// the decoders' opens answer size and mtime from the Client's version
// cache, not the store; so an object replaced by one of the same size
// (a file rewritten in place, an hour after it was first written) is read
// as its new bytes mixed with what was planned from the old, with no error.
func TestNoETagReplacedSameSize(t *testing.T) {
	setup(t)
	path := filepath.Join(bucket, "rv-samesize/t.parquet")
	name := "s3://data/rv-samesize/t.parquet"
	writeTable(t, path, 30000)
	hourAgo := time.Now().Add(-time.Hour) // written a while ago
	os.Chtimes(path, hourAgo, hourAgo)
	old, _ := os.ReadFile(path)
	src := newSource(t, objstore.Config{PrefetchBytes: -1})
	f, err := src.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if etag, _ := mustStat(t, f).Sys().(string); etag != "" {
		t.Skipf("the store gave an ETag (%q)", etag)
	}
	// Same size, other bytes, a Last-Modified of now.
	nb := bytes.Clone(old)
	for i := 1000; i < 2000; i++ {
		nb[i] ^= 0xff
	}
	os.WriteFile(path, nb, 0o644)
	p := make([]byte, 1000)
	_, err = f.ReadAt(p, 1000)
	if err == nil && !bytes.Equal(p, old[1000:2000]) {
		t.Fatalf("an object replaced (same size, Last-Modified an hour after the one Open saw) after Open: ReadAt returned the new bytes with no error; want decode.ErrFileChanged")
	}
	if err != nil && !errors.Is(err, decode.ErrFileChanged) {
		t.Fatalf("err %v, want ErrFileChanged", err)
	}
}

// TestOldVersionBlocksBlockPrefetch: a block of an object's previous
// version (different ETag) counts as covering a range of the current
// version (coveredLocked compares offsets only), so after an object is
// replaced the new version's prefetch is skipped wherever an old block
// lies: its decoders read on demand, request by request, and the old
// blocks keep their budget until a later prefetch sweeps them (30 s).
func TestOldVersionBlocksBlockPrefetch(t *testing.T) {
	setup(t)
	key := "rv-cover/t.parquet"
	name := "s3://data/" + key
	putObject(t, key, 60000)
	src := newSource(t, objstore.Config{})
	c := src.Client()
	f1, err := src.OpenFresh(name)
	if err != nil {
		t.Fatal(err)
	}
	if etag, _ := mustStat(t, f1).Sys().(string); etag == "" {
		t.Skip("no ETag")
	}
	rs := []decode.Range{{Off: 4, Len: 256 << 10}}
	base := c.Stats().Bytes
	f1.(*objstore.File).Prefetch(rs)
	waitBytes(t, c, base, rs[0].Len)
	f1.Close()

	putObject(t, key, 61000)
	f2, err := src.OpenFresh(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	held := c.PrefetchInUse()
	base = c.Stats().Bytes
	f2.(*objstore.File).Prefetch(rs)
	time.Sleep(200 * time.Millisecond)
	fetched := c.Stats().Bytes - base
	proxy.Reset()
	p := make([]byte, rs[0].Len)
	if _, err := f2.ReadAt(p, rs[0].Off); err != nil {
		t.Fatal(err)
	}
	if n := proxy.Requests(); n != 0 || fetched == 0 {
		t.Fatalf("prefetch of the current version fetched %d bytes (%d held before, by the old version's block); reading the prefetched range then made %d requests (%q), want 0", fetched, held, n, proxy.Log())
	}
}

// TestCoalescedGapHoldsBudget: ranges less than CoalesceGap apart
// are fetched as one block, gap included; a block is released when
// readers have taken len(buf) bytes, but nobody ever reads the gap, so a
// block with a gap is never released by reading: it holds its budget
// until it is 30 s old AND a later prefetch sweeps. docs/storage.md:
// blocks "are released once read (or 30 s after, unread)".
func TestCoalescedGapHoldsBudget(t *testing.T) {
	setup(t)
	writeTable(t, filepath.Join(bucket, "rv-gap/t.parquet"), 30000)
	src := newSource(t, objstore.Config{})
	c := src.Client()
	f, err := src.Open("s3://data/rv-gap/t.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Two column chunks 1,000 bytes apart: one block.
	rs := []decode.Range{{Off: 4, Len: 100 << 10}, {Off: 4 + 101<<10, Len: 100 << 10}}
	base := c.Stats().Bytes
	f.(*objstore.File).Prefetch(rs)
	waitBytes(t, c, base, 201<<10)
	for _, r := range rs {
		if _, err := f.ReadAt(make([]byte, r.Len), r.Off); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.PrefetchInUse(); n != 0 {
		t.Fatalf("every prefetched range was read, and %d bytes of the budget are still held (the 1 KiB gap between the two ranges was never read, so the block never counts as read)", n)
	}
}

type gapRow struct {
	X int64 `parquet:"x"`
	S bool  `parquet:"s"` // a small chunk between x and y
	Y int64 `parquet:"y"`
}

// TestDecodeWithSkippedColumnHoldsBudget: the same through the
// decoder: a job projecting x and y of a table whose small column s lies
// between them (its chunk, 2.5 KB a row group, is less than CoalesceGap)
// decodes every unit, and the budget is not whole again: each unit's
// block stays held (until 30 s old and a later prefetch sweeps). Under a
// steady job the budget fills with blocks already read, and later units
// get no read-ahead: the budget is spent on nothing. TestPrefetchBudget
// asserts the same property, on a projection whose gaps are too wide to
// coalesce.
func TestDecodeWithSkippedColumnHoldsBudget(t *testing.T) {
	setup(t)
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[gapRow](&buf, parquet.Compression(&parquet.Uncompressed), parquet.MaxRowsPerRowGroup(20000))
	rows := make([]gapRow, 100000)
	for i := range rows {
		rows[i] = gapRow{X: int64(i), S: i%3 == 0, Y: int64(i) * 5}
	}
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(bucket, "rv-gapdec"), 0o755)
	if err := os.WriteFile(filepath.Join(bucket, "rv-gapdec/t.parquet"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	src := newSource(t, objstore.Config{})
	p, err := decode.PlanFiles(context.Background(), []string{"s3://data/rv-gapdec/t.parquet"}, decode.PlanOptions{Columns: []string{"x", "y"}, FS: mount(src)})
	if err != nil {
		t.Fatal(err)
	}
	decodeAll(t, p)
	if n := src.Client().PrefetchInUse(); n != 0 {
		t.Fatalf("after decoding all %d units of x and y: %d bytes of the prefetch budget still held (skipped column s sits in the coalesced gap)", len(p.Units), n)
	}
}

// TestOverlappingBlocksHoldBudget: two prefetches of one version
// whose ranges overlap without one covering the other (two sliced units
// of a row group sharing the page that straddles their boundary, or a
// unit announced ahead and then prefetched by its decoder with a
// different projection) make two overlapping blocks. A read of the second
// range takes its first bytes from the first block (find returns the
// first block holding an offset), so the second block never counts its
// bytes as read: it keeps its budget until swept, although every byte
// asked of either block was read.
func TestOverlappingBlocksHoldBudget(t *testing.T) {
	setup(t)
	writeTable(t, filepath.Join(bucket, "rv-overlap/t.parquet"), 30000)
	src := newSource(t, objstore.Config{})
	c := src.Client()
	f, err := src.Open("s3://data/rv-overlap/t.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := decode.Range{Off: 4, Len: 200 << 10}
	b := decode.Range{Off: 4 + 100<<10, Len: 200 << 10}
	base := c.Stats().Bytes
	f.(*objstore.File).Prefetch([]decode.Range{a})
	f.(*objstore.File).Prefetch([]decode.Range{b})
	waitBytes(t, c, base, b.Off+b.Len-a.Off) // the bytes of both, at least
	for _, r := range []decode.Range{b, a} {
		if _, err := f.ReadAt(make([]byte, r.Len), r.Off); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.PrefetchInUse(); n != 0 {
		t.Fatalf("both prefetched ranges were read whole, and %d bytes of the budget are still held", n)
	}
}

// TestConcurrentReaders: readers of one object on many goroutines,
// each prefetching the same ranges (a block shared by readers) and
// reading them whole, get the object's bytes, and the budget is whole
// again at the end (run with -race).
func TestConcurrentReaders(t *testing.T) {
	setup(t)
	path := filepath.Join(bucket, "rv-conc/t.parquet")
	writeTable(t, path, 60000)
	want, _ := os.ReadFile(path)
	src := newSource(t, objstore.Config{PrefetchBytes: 1 << 20, MaxBlock: 64 << 10, Concurrency: 3})
	c := src.Client()
	var rs []decode.Range
	for off := int64(4); off+150<<10 < int64(len(want))-64<<10; off += 150 << 10 {
		rs = append(rs, decode.Range{Off: off, Len: 40 << 10}, decode.Range{Off: off + 50<<10, Len: 90 << 10})
	}
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			f, err := src.Open("s3://data/rv-conc/t.parquet")
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			f.(*objstore.File).Prefetch(rs)
			for i := range rs {
				r := rs[(i+g)%len(rs)]
				p := make([]byte, r.Len)
				if _, err := f.ReadAt(p, r.Off); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(p, want[r.Off:r.Off+r.Len]) {
					errs <- fmt.Errorf("reader %d: wrong bytes at %d", g, r.Off)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n := c.PrefetchInUse(); n < 0 || n > 1<<20 {
		t.Fatalf("PrefetchInUse %d out of [0, budget]", n)
	}
	t.Logf("held after: %d", c.PrefetchInUse())
}

// TestStoreIgnoringIfMatch: the object's ETag was "v1" when Open
// read its tail, and the store answers a later ranged GET carrying
// If-Match "v1" with a 206 whose ETag is "v2" (a store, or a cache in
// front of one, that does not evaluate If-Match on GET): the response
// itself says it is another version, and the bytes are returned as the
// planned version's, with no error. docs/storage.md: "an object replaced
// after planning fails the job ... instead of mixing two versions".
func TestStoreIgnoringIfMatch(t *testing.T) {
	setup(t)
	writeTable(t, filepath.Join(bucket, "rv-ifmatch/t.parquet"), 30000)
	src := newSource(t, objstore.Config{Endpoint: server.Endpoint, Transport: rangeStore{dir: bucket, answer: honest, later: "v2"}, PrefetchBytes: -1})
	f, err := src.Open("s3://data/rv-ifmatch/t.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = f.ReadAt(make([]byte, 100), 1000)
	if !errors.Is(err, decode.ErrFileChanged) {
		t.Fatalf("ReadAt of a version \"v1\" answered with ETag \"v2\": err %v, want decode.ErrFileChanged", err)
	}
	t.Log(err)
}

func writeGapTable(t *testing.T, path string, rows int, k int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[gapRow](&buf, parquet.Compression(&parquet.Uncompressed), parquet.MaxRowsPerRowGroup(20000))
	rs := make([]gapRow, rows)
	for i := range rs {
		rs[i] = gapRow{X: int64(i) + k, S: i%3 == 0, Y: int64(i) * 5}
	}
	if _, err := w.Write(rs); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestNoETagJobReadsRewrittenObject: the same as
// TestNoETagReplacedSameSize, through a job: a store without ETags
// (versitygw over files written behind its back, which docs/storage.md
// says is "checked by size and Last-Modified"), an object rewritten in
// place with other values and the same size after the job planned it,
// with a Last-Modified an hour later. The job's decoders open the object
// from the Client's version cache (the planned size and mtime, so the
// decoder's check passes without asking the store) and read with no
// condition: the job yields the new values under the old plan, no error.
func TestNoETagJobReadsRewrittenObject(t *testing.T) {
	setup(t)
	path := filepath.Join(bucket, "rv-rewrite/t.parquet")
	a := writeGapTable(t, path, 40000, 0)
	hourAgo := time.Now().Add(-time.Hour) // written a while ago
	os.Chtimes(path, hourAgo, hourAgo)
	src := newSource(t, objstore.Config{})
	p, err := decode.PlanFiles(context.Background(), []string{"s3://data/rv-rewrite/t.parquet"}, decode.PlanOptions{FS: mount(src)})
	if err != nil {
		t.Fatal(err)
	}
	if b := writeGapTable(t, path, 40000, 1000); len(b) != len(a) {
		t.Fatalf("rewritten table: %d bytes, want %d", len(b), len(a))
	}
	d := p.NewDecoder()
	defer d.Close()
	var b column.Batch
	err = d.Decode(context.Background(), p.Units[0], &b)
	if err == nil {
		x := b.Columns[0].Int64s()
		t.Fatalf("decode after the object was rewritten (same size, Last-Modified an hour after the planned one): no error, x[0..2] = %v (planned object: [0 1 2])", x[:3])
	}
	if !errors.Is(err, decode.ErrFileChanged) {
		t.Fatalf("err %v, want ErrFileChanged", err)
	}
}

// TestBlockPastAHoleUnused: take serves only the leading bytes of a
// read from blocks; the first byte no block holds sends the whole rest of
// the read on demand, blocks further on included. A block that starts
// inside a read is then never read: its bytes are fetched twice and it
// keeps its budget until swept. It happens under budget pressure (a long
// chunk split at MaxBlock, the budget holding only its last piece), and
// whenever the block before it was taken by another reader or failed; the
// held budget then refuses more blocks: read-ahead starves itself.
func TestBlockPastAHoleUnused(t *testing.T) {
	setup(t)
	writeTable(t, filepath.Join(bucket, "rv-hole/t.parquet"), 30000)
	src := newSource(t, objstore.Config{PrefetchBytes: 30 << 10, MaxBlock: 64 << 10})
	c := src.Client()
	f, err := src.Open("s3://data/rv-hole/t.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := decode.Range{Off: 4, Len: 150 << 10} // pieces of 64, 64 and 22 KiB: the budget holds the last
	base := c.Stats().Bytes
	f.(*objstore.File).Prefetch([]decode.Range{r})
	waitBytes(t, c, base, 22<<10)
	if n := c.PrefetchInUse(); n != 22<<10 {
		t.Fatalf("%d bytes prefetched, want the last piece's 22 KiB", n)
	}
	proxy.Reset()
	if _, err := f.ReadAt(make([]byte, r.Len), r.Off); err != nil {
		t.Fatal(err)
	}
	if got, held := proxy.Bytes(), c.PrefetchInUse(); got != r.Len-22<<10 || held != 0 {
		t.Fatalf("reading the range fetched %d bytes on demand (%q), want %d (all but the prefetched piece); %d bytes of budget still held, want 0", got, proxy.Log(), r.Len-22<<10, held)
	}
}
