package engine_test

import (
	"fmt"
	"testing"

	"github.com/lastmile/lastmile/shm"
)

// TestPadRows: with batch.last: pad, the batches that complete an epoch's
// last step say how many of their rows are padding (pad_rows), and exactly
// the rows past the epoch's end are counted: the real rows of every rank,
// added up, are the epoch's rows, each once.
func TestPadRows(t *testing.T) {
	for _, tc := range []struct {
		world, size int
		epochs      int
		shuffle     string
	}{
		{1, 768, 1, ""},
		{3, 512, 2, ""},
		{8, 97, 1, "shuffle: {units: true, buffer: 1000}"},
		{4, 3000, 1, ""}, // fewer rows than a step: every batch but the first real rows pads
	} {
		t.Run(fmt.Sprintf("world %d size %d", tc.world, tc.size), func(t *testing.T) {
			_, res, err := runJob(t, fmt.Sprintf(`
inputs: [DATA]
columns: [row_id]
batch: {size: %d, last: pad}
world_size: %d
epochs: %d
seed: 3
%s
ring: {dir: RINGDIR, name: t, slots: 3}
`, tc.size, tc.world, tc.epochs, tc.shuffle))
			if err != nil {
				t.Fatal(err)
			}
			real := make([]map[int64]int, tc.epochs)
			for e := range real {
				real[e] = map[int64]int{}
			}
			for r, g := range res {
				if g.err != nil {
					t.Fatalf("rank %d: %v", r, g.err)
				}
				for k, c := range g.batches {
					pad, rows := g.pads[k], g.rows[k]
					if pad < 0 || pad > len(rows) || (pad > 0) != (c.Flags&shm.FlagPadded != 0) {
						t.Fatalf("rank %d batch %d: pad_rows %d of %d rows, flags %#x", r, k, pad, len(rows), c.Flags)
					}
					for _, id := range rows[:len(rows)-pad] {
						real[c.Epoch][id]++
					}
				}
			}
			for e, seen := range real {
				if len(seen) != fixtureRows {
					t.Errorf("epoch %d: %d distinct real rows, want %d", e, len(seen), fixtureRows)
				}
				for id, n := range seen {
					if n != 1 {
						t.Fatalf("epoch %d: real row %d counted %d times", e, id, n)
					}
				}
			}
		})
	}
}
