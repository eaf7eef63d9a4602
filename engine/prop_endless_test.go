package engine_test

import (
	"context"
	"sync"
	"testing"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// rvRunUntil runs c (epochs 0 allowed) and reads every rank until it has
// seen a batch of epoch stop, then cancels the run; it returns the
// batches of epochs before stop.
func rvRunUntil(t *testing.T, c rvCfg, opts engine.Options, stop uint64) []rvStream {
	t.Helper()
	dir := t.TempDir()
	job, err := spec.Parse("t.yaml", []byte(c.src(dir)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var res []rvStream
	var wg sync.WaitGroup
	var mu sync.Mutex
	doneRanks := 0
	opts.Ready = func(rings []string) {
		res = make([]rvStream, len(rings))
		for r, name := range rings {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stopped := false
				_ = eachBatch(ctx, dir, name, func(b *shm.Batch) {
					if stopped {
						return
					}
					if b.Cursor.Epoch >= stop {
						stopped = true
						mu.Lock()
						doneRanks++
						if doneRanks == len(rings) {
							cancel()
						}
						mu.Unlock()
						return
					}
					h, _ := hashBatch(b)
					res[r].cur = append(res[r].cur, b.Cursor)
					res[r].hash = append(res[r].hash, h)
				})
			}()
		}
	}
	_, _ = engine.Run(ctx, job, opts)
	wg.Wait()
	return res
}

// Epochs without end give, epoch for epoch, the batches of a job with
// epochs set, resumed or not, with and without the unit cache.
func TestEndlessEqualsCounted(t *testing.T) {
	for _, last := range []string{"drop", "pad"} {
		for _, cache := range []bool{false, true} {
			c := rvCfg{last: last, buf: 777, world: 3, epochs: 4, size: 400, pipe: rvFilterEmpties, mur: 333, units: true, workers: 3, cache: cache}
			want, _, err := rvRun(t, c, engine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ce := c
			ce.epochs = 0
			got := rvRunUntil(t, ce, engine.Options{}, 4)
			if d := rvDiff(got, want); d != "" {
				t.Errorf("%v epochs 0: %s", c, d)
			}
			cur := []engine.Cursor{{Epoch: 2, Batch: 1}, {Epoch: 2, Batch: 1}, {Epoch: 1, Batch: 3}}
			got = rvRunUntil(t, ce, engine.Options{Resume: cur}, 4)
			w := make([]rvStream, 3)
			for r := range w {
				w[r] = rvTail(want[r], cur[r])
			}
			if d := rvDiff(got, w); d != "" {
				t.Errorf("%v epochs 0 resumed %v: %s", c, cur, d)
			}
		}
	}
}
