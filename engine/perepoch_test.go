package engine_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

// TestBatchesPerEpoch checks Progress.BatchesPerEpoch against the batches
// the rings really deliver: known when the rings are ready for pipelines
// that keep every row, and after the first epoch for those that drop rows.
func TestBatchesPerEpoch(t *testing.T) {
	cases := []struct {
		name    string
		extra   string
		atReady bool // known when Ready is called
	}{
		{"drop", "batch: {size: 512, last: drop}\nworld_size: 3\n", true},
		{"pad", "batch: {size: 512, last: pad}\nworld_size: 3\n", true},
		{"keep", "batch: {size: 768, last: keep}\nworld_size: 1\n", true},
		{"fewer rows than a step", "batch: {size: 3000, last: drop}\nworld_size: 4\n", true},
		{"filter", "batch: {size: 100, last: drop}\nworld_size: 2\npipeline:\n  - filter: \"row_id % 3 == 0\"\n", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			abs, _ := filepath.Abs("../testdata/small")
			src := "inputs: [" + abs + "]\ncolumns: [row_id]\nepochs: 2\nring: {dir: " + dir + ", name: t, slots: 3}\n" + tc.extra
			job, err := spec.Parse("test.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			var prog engine.Progress
			res := make([]got, job.WorldSize)
			var wg sync.WaitGroup
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			knownAtReady := false
			_, err = engine.Run(ctx, job, engine.Options{
				Linger: true, Progress: &prog,
				Ready: func(rings []string) {
					_, knownAtReady = prog.BatchesPerEpoch()
					for r, name := range rings {
						wg.Add(1)
						go func() {
							defer wg.Done()
							res[r] = consume(ctx, dir, name)
						}()
					}
				},
			})
			if err != nil {
				cancel()
			}
			wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if knownAtReady != tc.atReady {
				t.Errorf("known when the rings were ready: %v, want %v", knownAtReady, tc.atReady)
			}
			n, ok := prog.BatchesPerEpoch()
			if !ok {
				t.Fatal("not known after the job")
			}
			for r, g := range res {
				if g.err != nil {
					t.Fatalf("rank %d: %v", r, g.err)
				}
				per := [2]int64{}
				for _, c := range g.batches {
					per[c.Epoch]++
				}
				if per[0] != n || per[1] != n {
					t.Errorf("rank %d: %v batches in epochs 0 and 1, BatchesPerEpoch %d", r, per, n)
				}
			}
			if strings.Contains(tc.name, "fewer") && n != 0 {
				t.Errorf("BatchesPerEpoch %d, want 0", n)
			}
		})
	}
}
