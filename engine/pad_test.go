package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
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

// TestQueueDepth: what docs/ring-format.md §6.1 says of lastmile's job
// producer: it holds the slot of the step it fills while the step before
// waits for publishing, so while a job runs at most N-1 of its batches
// wait in a ring of N slots, and N only right after the last batch of an
// epoch (or of the stream). A slow trainer keeps the ring full.
func TestQueueDepth(t *testing.T) {
	const slots = 3
	dir := t.TempDir()
	abs, _ := filepath.Abs("../testdata/small")
	job, err := spec.Parse("test.yaml", []byte(fmt.Sprintf(`
inputs: [%s]
columns: [row_id]
batch: {size: 1000}
epochs: 2
ring: {dir: %s, name: depth, slots: %d}
`, abs, dir, slots)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var maxSeen, full uint64 // full: snapshots with all N slots waiting
	var bad []string
	done := make(chan struct{})
	read := func(name string) {
		defer close(done)
		c, err := shm.Open(dir, name)
		if err != nil {
			bad = append(bad, err.Error())
			return
		}
		defer c.Close()
		o, err := shm.Observe(dir, name)
		if err != nil {
			bad = append(bad, err.Error())
			return
		}
		defer o.Close()
		for {
			// Tail is read before Head, so a snapshot never shows more
			// batches waiting than there were.
			for range 20 {
				info := o.Info()
				n := info.Occupancy()
				maxSeen = max(maxSeen, n)
				if n == slots {
					full++
				}
				if n > slots || n == slots && !(info.HasLast && info.Last.Flags&shm.FlagLastInEpoch != 0) {
					bad = append(bad, fmt.Sprintf("%d of %d slots waiting, last published %+v", n, slots, info.Last))
				}
				time.Sleep(100 * time.Microsecond)
			}
			if _, err := c.Next(ctx); err != nil {
				if !errors.Is(err, io.EOF) {
					bad = append(bad, err.Error())
				}
				return
			}
		}
	}
	_, err = engine.Run(ctx, job, engine.Options{Linger: true, Ready: func(rings []string) { go read(rings[0]) }})
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if len(bad) > 0 {
		t.Fatal(bad)
	}
	if maxSeen < slots-1 {
		t.Fatalf("at most %d batches waited: the ring never filled", maxSeen)
	}
	t.Logf("at most %d batches waited; all %d slots in %d snapshots", maxSeen, slots, full)
}
