package objstore_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lastmile/lastmile/objstore"
)

// TestCloseDuringReads: File.Close while other goroutines read the
// object's tail. Before, Close cleared the tail that a read had just
// found present: the read copied nothing and returned its length (zeros
// for the bytes asked), or indexed the cleared tail and panicked; the
// race detector saw both. Now each read returns the object's bytes, or,
// once the file is closed, an error wrapping os.ErrClosed that names the
// object's URL; every read after Close fails so.
func TestCloseDuringReads(t *testing.T) {
	setup(t)
	src := newSource(t, objstore.Config{})
	const key = "close-race/t.parquet"
	_, tailOff := tailFile(t, src, key)
	want, err := os.ReadFile(filepath.Join(bucket, key))
	if err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		df, err := src.OpenFresh("s3://data/" + key)
		if err != nil {
			t.Fatal(err)
		}
		f := df.(*objstore.File)
		var wg sync.WaitGroup
		var reads atomic.Int64
		var closed atomic.Bool
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := make([]byte, 4<<10)
				// Until a read fails, or a few reads after Close returned
				// (before the fix, reads after Close went on without end).
				for i, after := 0, 0; after < 20; i++ {
					if closed.Load() {
						after++
					}
					off := tailOff + int64((g*977+i*4099)%(60<<10))
					n, err := f.ReadAt(p, off)
					reads.Add(1)
					if err != nil {
						if !errors.Is(err, os.ErrClosed) || !strings.Contains(err.Error(), "s3://data/"+key) {
							errs <- err
						}
						return
					}
					if n != len(p) || !bytes.Equal(p, want[off:off+int64(n)]) {
						errs <- errors.New("a read during Close returned other bytes than the object's")
						return
					}
				}
			}()
		}
		for reads.Load() < 64 {
			runtime.Gosched()
		}
		f.Close()
		closed.Store(true)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
		if _, err := f.ReadAt(make([]byte, 10), tailOff); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("a read after Close: %v, want os.ErrClosed", err)
		}
	}
}
