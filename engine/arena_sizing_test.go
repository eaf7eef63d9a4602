package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"

	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/datagen"
)

func uniformData(t *testing.T, rows, rg int64) string {
	t.Helper()
	dir := t.TempDir()
	cfg := datagen.DefaultConfig()
	cfg.Dense, cfg.Cats, cfg.Seqs, cfg.SeqMeanLen, cfg.SeqMaxLen = 4, 2, 1, 5, 20
	cfg.PageBytes = 16 << 10
	cfg.Rows, cfg.RowGroupRows, cfg.Files = rows, rg, 4
	if _, err := datagen.Write(context.Background(), dir, cfg); err != nil {
		t.Fatal(err)
	}
	return dir
}

// With units of one size, or a large unit beside small ones (as a table
// appended to over time has), the chunk count covers the units in flight
// and those the unreleased batches name: no unit falls back to the heap.
func TestArenaNoFallbacks(t *testing.T) {
	uniform, mixed := uniformData(t, 16000, 1000), mixedData(t, 20000, 500)
	for _, tc := range []struct{ name, data, size, world, slots, w string }{
		{"uniform batches of a unit", uniform, "1000", "3", "3", "1"},
		{"uniform 8 ranks", uniform, "100", "8", "2", "2"},
		{"uniform tiny batches", uniform, "5", "2", "2", "2"},
		{"mixed unit sizes", mixed, "500", "2", "4", "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.NewReplacer("@S@", tc.size, "@W@", tc.world, "@SL@", tc.slots, "@WK@", tc.w).Replace(`
inputs: [MIXED]
batch: {size: @S@, last: drop}
world_size: @W@
epochs: 2
seed: 5
shuffle: {units: true}
decode: {workers: @WK@}
ring: {dir: RINGDIR, name: a, slots: @SL@, arena: true}
`)
			st, _ := runHeld(t, src, tc.data, time.Millisecond)
			t.Logf("units %d fallbacks %d", st.ArenaUnits, st.ArenaFallbacks)
			if st.ArenaFallbacks != 0 {
				t.Errorf("%d of %d units decoded to the heap for want of a free chunk", st.ArenaFallbacks, st.ArenaUnits+st.ArenaFallbacks)
			}
		})
	}
}

// Resumed runs (ranks at different cursors, mid-epoch and mid-unit):
// the same bytes with the arena as without, none changing while held.
func TestArenaResume(t *testing.T) {
	data := mixedData(t, 6000, 300)
	src := strings.ReplaceAll(`
inputs: [MIXED]
batch: {size: 128, last: pad}
world_size: 3
epochs: 3
seed: 5
shuffle: {units: true}
decode: {workers: 2}
ring: {dir: RINGDIR, name: a, slots: 2ARENA}
`, "MIXED", data)
	for _, resume := range [][]engine.Cursor{
		{{Epoch: 0, Batch: 7}, {Epoch: 0, Batch: 9}, {Epoch: 1, Batch: 3}},
		{{Epoch: 1, Batch: 0}, {Epoch: 1, Batch: 1}, {Epoch: 1, Batch: 2}},
	} {
		run := func(s string, hold time.Duration) []heldCheck {
			_, res, _, err := runReading(t, s, func(o *engine.Options) { o.Remove = true; o.Resume = resume }, holdAndCheck(hold, 3))
			if err != nil {
				t.Fatal(err)
			}
			for r, d := range res {
				if d.err != nil || len(d.changed) > 0 {
					t.Fatalf("rank %d: %v, %d changed while held", r, d.err, len(d.changed))
				}
			}
			return res
		}
		want := run(strings.ReplaceAll(src, "ARENA", ""), 0)
		got := run(strings.ReplaceAll(src, "ARENA", ", arena: true"), time.Millisecond)
		for r := range want {
			if !slices.Equal(got[r].batches, want[r].batches) {
				t.Errorf("resume %v rank %d: differ", resume, r)
			}
			t.Logf("rank %d: %d batches, %d arena tensors", r, len(got[r].batches), got[r].inArena)
		}
	}
}

// EstimateFootprint counts no unit arena for a job whose units are all
// split (decode.max_unit_rows): the run makes none.
func TestArenaFootprintSplitUnits(t *testing.T) {
	dir := t.TempDir()
	abs, _ := filepath.Abs("../testdata/small")
	job, err := spec.Parse("t.yaml", []byte(fmt.Sprintf("inputs: [%s]\nbatch: {size: 100}\ndecode: {workers: 2, max_unit_rows: 500}\nring: {dir: %s, name: a, arena: true}\n", abs, dir)))
	if err != nil {
		t.Fatal(err)
	}
	fp, err := engine.EstimateFootprint(context.Background(), job, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := engine.Run(context.Background(), job, engine.Options{Remove: true, Ready: func(rings []string) {
		go eachBatch(context.Background(), dir, rings[0], func(*shm.Batch) {})
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("footprint arena %d bytes; run: %d arena units", fp.ArenaBytes, st.ArenaUnits)
	if fp.ArenaBytes > 0 {
		t.Errorf("EstimateFootprint counts a %d-byte arena the run never makes", fp.ArenaBytes)
	}
}
