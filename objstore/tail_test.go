package objstore_test

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/objstore"
	"github.com/lastmile/lastmile/objstore/s3test"
)

// tailFile opens key fresh (its last 64 KiB fetched with the open) and
// returns it and where its tail starts.
func tailFile(t *testing.T, src *objstore.Source, key string) (*objstore.File, int64) {
	t.Helper()
	writeTable(t, filepath.Join(bucket, key), 30000)
	f, err := src.OpenFresh("s3://data/" + key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	size := mustStat(t, f).Size()
	if size < 512<<10 {
		t.Fatalf("object of %d bytes; want one far longer than its tail", size)
	}
	return f.(*objstore.File), size - 64<<10
}

// TestTailReadReleasesBlock: a unit announced ahead (PrefetchUnit, which
// opens nothing and so has no tail) whose ranges lie in the object's last
// 64 KiB (the last row group's chunks, its page indexes) is fetched into
// a block; the decoder that reads them has the tail from its open (an
// open after the version cache's minute, or a fresh one) and reads them
// from there. Those bytes count as read from the block, which gives its
// budget back at once, not 30 s later when a sweep finds it stale.
func TestTailReadReleasesBlock(t *testing.T) {
	setup(t)
	src := newSource(t, objstore.Config{})
	c := src.Client()
	f, tailOff := tailFile(t, src, "tail-block/t.parquet")
	r := decode.Range{Off: tailOff + 10<<10, Len: 20 << 10}
	base := c.Stats().Bytes
	src.PrefetchUnit("s3://data/tail-block/t.parquet", []decode.Range{r})
	waitBytes(t, c, base, r.Len)
	if n := c.PrefetchInUse(); n != r.Len {
		t.Fatalf("%d bytes of budget held by the announced unit; want %d", n, r.Len)
	}
	if _, err := f.ReadAt(make([]byte, r.Len), r.Off); err != nil {
		t.Fatal(err)
	}
	if n := c.PrefetchInUse(); n != 0 {
		t.Fatalf("the announced range was read (from the open's tail), and its block still holds %d bytes of budget", n)
	}
}

// TestTailReadReleasesBlockInFlight: the same, with the tail read while
// the block's fetch still runs: the fetch gives the budget back when it
// ends.
func TestTailReadReleasesBlockInFlight(t *testing.T) {
	setup(t)
	src := newSource(t, objstore.Config{})
	c := src.Client()
	f, tailOff := tailFile(t, src, "tail-inflight/t.parquet")
	r := decode.Range{Off: tailOff + 10<<10, Len: 20 << 10}
	proxy.SetHang(300 * time.Millisecond)
	proxy.SetFaults(func(int64, *http.Request) s3test.Fault { return s3test.Hang })
	defer proxy.SetHang(0)
	defer proxy.SetFaults(nil)
	src.PrefetchUnit("s3://data/tail-inflight/t.parquet", []decode.Range{r})
	if _, err := f.ReadAt(make([]byte, r.Len), r.Off); err != nil {
		t.Fatal(err)
	}
	if n := c.PrefetchInUse(); n != r.Len {
		t.Fatalf("%d bytes of budget held right after the read; want the %d of the block still being fetched", n, r.Len)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.PrefetchInUse() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the block's fetch ended, and it still holds %d bytes of budget", c.PrefetchInUse())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReadAcrossTailFetchesNoTailByte: a range that starts before the
// tail and ends in it (a chunk straddling the tail's first byte) is read
// from a prefetched block up to the tail and from the tail after it: no
// byte the open fetched is fetched again.
func TestReadAcrossTailFetchesNoTailByte(t *testing.T) {
	setup(t)
	src := newSource(t, objstore.Config{})
	c := src.Client()
	f, tailOff := tailFile(t, src, "tail-across/t.parquet")
	r := decode.Range{Off: tailOff - 100<<10, Len: 150 << 10}
	base := c.Stats().Bytes
	f.Prefetch([]decode.Range{r})
	waitBytes(t, c, base, 100<<10) // up to the tail, which the open fetched
	proxy.Reset()
	if _, err := f.ReadAt(make([]byte, r.Len), r.Off); err != nil {
		t.Fatal(err)
	}
	if n, held := proxy.Bytes(), c.PrefetchInUse(); n != 0 || held != 0 {
		t.Fatalf("reading across the tail fetched %d bytes (%q), want 0; %d bytes of budget held, want 0", n, proxy.Log(), held)
	}
}
