package engine_test

// The unit arena's reuse invariant: a chunk is never decoded into while a
// batch that names it may still be read.

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lastmile/lastmile/datagen"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// heldCheck is a trainer that hashes each batch when it gets it, holds it
// (sleeping, so the producer runs ahead), hashes it again before release,
// and records any batch whose bytes changed while held.
type heldCheck struct {
	batches []string
	inArena int
	changed []string
	err     error
}

func hashBatch(b *shm.Batch) (string, int) {
	h := sha256.New()
	n := 0
	fmt.Fprintf(h, "%v %d %d\n", b.Cursor, b.Rows, b.PadRows)
	for _, t := range b.Tensors {
		fmt.Fprintf(h, "%s %v %v %v\n", t.Name, t.Role, t.DType, t.Shape)
		h.Write(t.Data)
		if t.InArena {
			n++
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil)), n
}

func holdAndCheck(hold time.Duration, seed uint64) func(ctx context.Context, dir, name string) heldCheck {
	return func(ctx context.Context, dir, name string) heldCheck {
		var d heldCheck
		rng := rand.New(rand.NewPCG(seed, uint64(len(name))))
		d.err = eachBatch(ctx, dir, name, func(b *shm.Batch) {
			h1, n := hashBatch(b)
			d.inArena += n
			if hold > 0 {
				time.Sleep(time.Duration(rng.Int64N(int64(hold))))
			}
			h2, _ := hashBatch(b)
			if h1 != h2 {
				d.changed = append(d.changed, fmt.Sprintf("%v", b.Cursor))
			}
			d.batches = append(d.batches, h1)
		})
		return d
	}
}

// mixedData writes a table whose units differ in size: one file of one
// large row group, and files of small row groups.
func mixedData(t *testing.T, bigRows, smallRG int64) string {
	t.Helper()
	dir := t.TempDir()
	cfg := datagen.DefaultConfig()
	cfg.Dense, cfg.Cats, cfg.Seqs, cfg.SeqMeanLen, cfg.SeqMaxLen = 4, 2, 1, 5, 20
	cfg.PageBytes = 16 << 10
	cfg.Rows, cfg.RowGroupRows, cfg.Files, cfg.Prefix = bigRows, bigRows, 1, "big"
	if _, err := datagen.Write(context.Background(), dir, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Rows, cfg.RowGroupRows, cfg.Files, cfg.Prefix = 12*smallRG, smallRG, 4, "small"
	cfg.Seed = 2
	if _, err := datagen.Write(context.Background(), dir, cfg); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runHeld(t *testing.T, src, data string, hold time.Duration) (engine.Stats, []heldCheck) {
	t.Helper()
	src = strings.ReplaceAll(src, "MIXED", data)
	st, res, dir, err := runReading(t, src, func(o *engine.Options) { o.Remove = true }, holdAndCheck(hold, 7))
	if err != nil {
		t.Fatal(err)
	}
	for r, d := range res {
		if d.err != nil {
			t.Fatalf("rank %d: %v", r, d.err)
		}
		if len(d.changed) > 0 {
			t.Errorf("rank %d: %d batches changed while held, first %v", r, len(d.changed), d.changed[:min(3, len(d.changed))])
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
		t.Errorf("left: %v", left)
	}
	return st, res
}

// Held batches never change, and every rank reads the same bytes with the
// arena as without it: many rings, tiny slots, small and large units,
// batches smaller and larger than units, several epochs.
func TestArenaHeldBatchesUnchanged(t *testing.T) {
	data := mixedData(t, 6000, 300)
	base := `
inputs: [MIXED]
batch: {size: @SIZE@, last: @LAST@}
world_size: @WORLD@
epochs: 2
seed: 5
shuffle: {units: true}
decode: {workers: @W@}
ring: {dir: RINGDIR, name: a, slots: 2ARENA}
`
	for _, tc := range []struct{ size, last, world, w string }{
		{"64", "drop", "4", "2"},
		{"100", "pad", "3", "1"},
		{"1000", "drop", "2", "2"},
		{"7", "drop", "5", "2"},
	} {
		t.Run(tc.size+tc.last+tc.world, func(t *testing.T) {
			src := strings.NewReplacer("@SIZE@", tc.size, "@LAST@", tc.last, "@WORLD@", tc.world, "@W@", tc.w).Replace(base)
			_, want := runHeld(t, strings.ReplaceAll(src, "ARENA", ""), data, 0)
			st, got := runHeld(t, strings.ReplaceAll(src, "ARENA", ", arena: true"), data, 2*time.Millisecond)
			arena := 0
			for r := range want {
				arena += got[r].inArena
				if !slices.Equal(got[r].batches, want[r].batches) {
					t.Errorf("rank %d: arena batches differ from copied ones (%d vs %d)", r, len(got[r].batches), len(want[r].batches))
				}
			}
			t.Logf("units %d fallbacks %d; tensors read from the arena %d", st.ArenaUnits, st.ArenaFallbacks, arena)
		})
	}
}

// A job canceled while its trainers hold batches: the batches published
// before the cancel are still delivered, unchanged.
func TestArenaCancelWhileHeld(t *testing.T) {
	data := mixedData(t, 6000, 300)
	src := strings.ReplaceAll(`
inputs: [MIXED]
batch: {size: 100, last: drop}
world_size: 3
epochs: 0
seed: 5
shuffle: {units: true}
decode: {workers: 2}
ring: {dir: RINGDIR, name: a, slots: 2, arena: true}
`, "MIXED", data)
	dir := t.TempDir()
	src = strings.ReplaceAll(src, "RINGDIR", dir)
	job, err := spec.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	res := make([]heldCheck, job.WorldSize)
	var mu sync.Mutex
	count := 0
	go func() {
		for {
			time.Sleep(5 * time.Millisecond)
			mu.Lock()
			c := count
			mu.Unlock()
			if c > 300 {
				cancel()
				return
			}
		}
	}()
	_, err = engine.Run(ctx, job, engine.Options{Remove: false, Ready: func(rings []string) {
		for r, name := range rings {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(r), 1))
				res[r].err = eachBatch(context.Background(), dir, name, func(b *shm.Batch) {
					h1, n := hashBatch(b)
					res[r].inArena += n
					time.Sleep(time.Duration(rng.Int64N(int64(2 * time.Millisecond))))
					if h2, _ := hashBatch(b); h1 != h2 {
						res[r].changed = append(res[r].changed, fmt.Sprint(b.Cursor))
					}
					mu.Lock()
					count++
					mu.Unlock()
				})
			}()
		}
	}})
	t.Logf("run: %v", err)
	wg.Wait()
	for r, d := range res {
		t.Logf("rank %d: end %v, %d arena tensors", r, d.err, d.inArena)
		if len(d.changed) > 0 {
			t.Errorf("rank %d: %d batches changed while held", r, len(d.changed))
		}
	}
	os.RemoveAll(dir)
}

// A hand-over (DetachRings, then a run that adopts the rings) while the
// trainers hold batches that name the first run's arena: those batches
// never change while held, before or after the first run stops.
func TestArenaHandOverWhileHeld(t *testing.T) {
	dir := t.TempDir()
	data := mixedData(t, 6000, 300)
	src := fmt.Sprintf("inputs: [%s]\ncolumns: [row_id, seq_0, dense_0, cat_0]\nbatch: {size: 100}\nworld_size: 3\nepochs: 2\nseed: 9\n"+
		"shuffle: {units: true}\ndecode: {workers: 2}\nring: {dir: %s, name: h, slots: 2, arena: true}\n", data, dir)
	job, err := spec.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var read atomic.Int64
	var wg sync.WaitGroup
	res := make([]heldCheck, job.WorldSize)
	resume := handOver(t, job, &wg, &read, 40, func(r int, name string) {
		rng := rand.New(rand.NewPCG(uint64(r), 3))
		res[r].err = eachBatch(context.Background(), dir, name, func(b *shm.Batch) {
			h1, n := hashBatch(b)
			res[r].inArena += n
			read.Add(1)
			time.Sleep(time.Duration(rng.Int64N(int64(3 * time.Millisecond))))
			if h2, _ := hashBatch(b); h1 != h2 {
				res[r].changed = append(res[r].changed, fmt.Sprint(b.Cursor))
			}
		})
	})
	if _, err := engine.Run(context.Background(), job, engine.Options{Resume: resume}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for r, d := range res {
		t.Logf("rank %d: %v, %d arena tensors", r, d.err, d.inArena)
		if d.err != nil {
			t.Errorf("rank %d: %v", r, d.err)
		}
		if len(d.changed) > 0 {
			t.Errorf("rank %d: %d batches changed while held: %v", r, len(d.changed), d.changed)
		}
	}
}

// A table whose large row groups decode.max_unit_rows splits (never
// decoded into the arena: decode.Unit.Whole) beside small row groups that
// are whole: the arena is sized by the whole units only, not by row
// groups it never holds.
func TestArenaSizedBySplitUnits(t *testing.T) {
	data := mixedData(t, 40000, 300)
	only := t.TempDir()
	small, _ := filepath.Glob(filepath.Join(data, "small-*"))
	for _, f := range small {
		b, _ := os.ReadFile(f)
		os.WriteFile(filepath.Join(only, filepath.Base(f)), b, 0o644)
	}
	src := `
inputs: [MIXED]
batch: {size: 300, last: drop}
world_size: 2
epochs: 2
seed: 5
shuffle: {units: true}
decode: {workers: 1, max_unit_rows: 4000}
ring: {dir: RINGDIR, name: a, slots: 4, arena: true}
`
	arenaSize := func(data string) (int64, engine.Stats) {
		var size int64
		s := strings.ReplaceAll(src, "MIXED", data)
		st, res, _, err := runReading(t, s, func(o *engine.Options) { o.Remove = true }, func(ctx context.Context, dir, name string) heldCheck {
			if name == "a.r0" {
				if m, _ := filepath.Glob(filepath.Join(dir, "arena+*")); len(m) == 1 {
					if fi, err := os.Stat(m[0]); err == nil {
						size = fi.Size()
					}
				}
			}
			return holdAndCheck(time.Millisecond, 1)(ctx, dir, name)
		})
		if err != nil {
			t.Fatal(err)
		}
		for r, d := range res {
			if d.err != nil || len(d.changed) > 0 {
				t.Fatalf("rank %d: %v, %d changed", r, d.err, len(d.changed))
			}
		}
		return size, st
	}
	alone, st1 := arenaSize(only)
	mixed, st2 := arenaSize(data)
	t.Logf("small units alone: arena %d bytes, units %d, fallbacks %d", alone, st1.ArenaUnits, st1.ArenaFallbacks)
	t.Logf("beside split row groups: arena %d bytes, units %d, fallbacks %d", mixed, st2.ArenaUnits, st2.ArenaFallbacks)
	if mixed > 2*alone {
		t.Errorf("the arena is %.1fx larger beside row groups that are split (and never decoded into it)", float64(mixed)/float64(alone))
	}
}
