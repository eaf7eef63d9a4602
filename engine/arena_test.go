package engine_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// digested is what a trainer read from one ring: a digest of every batch
// (cursor, rows and every tensor's name, role, shape and bytes), and how
// many tensors it read from the unit arena.
type digested struct {
	batches []string
	inArena int
	err     error
}

func digestRing(ctx context.Context, dir, name string) digested {
	var d digested
	d.err = eachBatch(ctx, dir, name, func(b *shm.Batch) {
		// A slow trainer: a chunk freed too early would be decoded
		// into while the batch that names it is read. (Not for tiny
		// batches, thousands of them.)
		if b.Rows >= 64 {
			time.Sleep(300 * time.Microsecond)
		}
		h := sha256.New()
		fmt.Fprintf(h, "%v %d %d\n", b.Cursor, b.Rows, b.PadRows)
		for _, t := range b.Tensors {
			fmt.Fprintf(h, "%s %v %v %v\n", t.Name, t.Role, t.DType, t.Shape)
			h.Write(t.Data)
			if t.InArena {
				d.inArena++
			}
		}
		d.batches = append(d.batches, fmt.Sprintf("%x", h.Sum(nil)))
	})
	return d
}

// differing counts the batches at which two digested streams differ,
// over their common length.
func differing(a, b []string) int {
	n := 0
	for k := range min(len(a), len(b)) {
		if a[k] != b[k] {
			n++
		}
	}
	return n
}

// runDigested runs src over testdata/small and digests every rank's ring.
func runDigested(t *testing.T, src string) (engine.Stats, []digested) {
	t.Helper()
	st, res, dir, err := runReading(t, src, func(o *engine.Options) { o.Remove = true }, digestRing)
	if err != nil {
		t.Fatal(err)
	}
	for r, d := range res {
		if d.err != nil {
			t.Fatalf("rank %d: %v", r, d.err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
		t.Errorf("files left in the ring directory after the run: %v", left)
	}
	return st, res
}

// A job with the unit arena gives every rank the same batches, byte for
// byte, as without it, and most of its tensors come from the arena: every
// column kind (dense, categorical, lists, nullable, strings), several
// ranks, unit shuffle, epochs that reuse every chunk, few slots.
func TestArenaByteIdentical(t *testing.T) {
	const job = `
inputs: [DATA]
batch: {size: 200, last: LAST}
world_size: 2
epochs: 3
seed: 9
shuffle: {units: true}
decode: {workers: WORKERS}
ring: {dir: RINGDIR, name: a, slots: 2ARENA}
`
	for _, tc := range []struct{ last, workers string }{{"drop", "2"}, {"pad", "1"}} {
		t.Run(tc.last, func(t *testing.T) {
			src := strings.NewReplacer("LAST", tc.last, "WORKERS", tc.workers).Replace(job)
			_, want := runDigested(t, strings.ReplaceAll(src, "ARENA", ""))
			st, got := runDigested(t, strings.ReplaceAll(src, "ARENA", ", arena: true"))
			for r := range want {
				if !slices.Equal(got[r].batches, want[r].batches) {
					t.Fatalf("rank %d: %d batches with the arena differ from the %d without", r, len(got[r].batches), len(want[r].batches))
				}
				if want[r].inArena != 0 {
					t.Fatalf("rank %d read %d tensors from an arena without ring.arena", r, want[r].inArena)
				}
				if got[r].inArena == 0 {
					t.Errorf("rank %d read no tensor from the arena", r)
				}
			}
			t.Logf("arena: %d units, %d fallbacks; rank 0 read %d tensors from it in %d batches", st.ArenaUnits, st.ArenaFallbacks, got[0].inArena, len(got[0].batches))
			if st.ArenaUnits == 0 || st.ArenaFallbacks != 0 {
				t.Errorf("%d units decoded into the arena, %d to the heap; want all into it", st.ArenaUnits, st.ArenaFallbacks)
			}
		})
	}
}

// A ring with an arena is format 4.2 and names a file that exists while
// it runs; a consumer that finds it missing fails, naming it.
func TestArenaFileNamedByTheRing(t *testing.T) {
	dir := t.TempDir()
	abs, _ := filepath.Abs("../testdata/small")
	job, err := spec.Parse("test.yaml", []byte(fmt.Sprintf("inputs: [%s]\nbatch: {size: 100}\nepochs: 1\nring: {dir: %s, name: a, arena: true}\n", abs, dir)))
	if err != nil {
		t.Fatal(err)
	}
	checked := make(chan error, 1)
	opts := engine.Options{Remove: true, Ready: func(rings []string) {
		checked <- func() error {
			b, err := os.ReadFile(filepath.Join(dir, rings[0]))
			if err != nil {
				return err
			}
			h, err := shm.ParseHeader(b, int64(len(b)))
			if err != nil {
				return err
			}
			if h.VersionMajor != 4 || h.ArenaID == 0 {
				return fmt.Errorf("ring %d.%d, arena %#x: want 4.x naming an arena", h.VersionMajor, h.VersionMinor, h.ArenaID)
			}
			arena := filepath.Join(dir, shm.ArenaName(h.ArenaID))
			st, err := os.Stat(arena)
			if err != nil {
				return err
			}
			if st.Size() != shm.ArenaHeaderSize+h.ArenaSize || st.Mode().Perm() != 0o600 {
				return fmt.Errorf("arena %s: %d bytes, mode %v; want %d, 0600", arena, st.Size(), st.Mode(), shm.ArenaHeaderSize+h.ArenaSize)
			}
			// Hide it: opening the ring must fail, naming it.
			if err := os.Rename(arena, arena+".hidden"); err != nil {
				return err
			}
			defer os.Rename(arena+".hidden", arena)
			_, err = shm.Open(dir, rings[0])
			if err == nil || !strings.Contains(err.Error(), arena) || !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("open with the arena missing: %v; want an error naming %s", err, arena)
			}
			return nil
		}()
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		if err := <-checked; err != nil {
			t.Error(err)
		}
		// Drain, so that the run ends.
		digestRing(ctx, dir, "a")
	}()
	if _, err := engine.Run(ctx, job, opts); err != nil {
		t.Fatal(err)
	}
}

// ring.arena is refused beside what would copy or gather every row.
func TestArenaRefused(t *testing.T) {
	for _, tc := range []struct{ extra, want string }{
		{"pipeline: [{filter: \"label == 1\"}]", "a pipeline"},
		{"shuffle: {buffer: 100}", "a row shuffle"},
		{"cache: {max_memory: 1MiB}", "a unit cache"},
		{"gpu: {staging: device}", "device staging"},
	} {
		src := "version: 1\ninputs: [x]\nring: {arena: true}\n" + tc.extra + "\n"
		_, err := spec.Parse("test.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), "ring.arena") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want a ring.arena error naming %q", tc.extra, err, tc.want)
		}
	}
}
