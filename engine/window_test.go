package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/datagen"
	"github.com/lastmile/lastmile/engine"
)

// windowJob keeps rows in uneven runs (the filter), so unit outputs vary
// in size, and packs fixed, nullable and list columns (PIPELINE: plain
// columns, or feature groups).
const windowJob = `
inputs: [DATA]
batch: {size: 150, last: pad}
world_size: 2
epochs: 4
seed: 9
shuffle: {units: true, buffer: %d}
ring: {dir: RINGDIR, name: w, slots: 3}
decode: {workers: 2, max_unit_rows: 700}
pipeline:
  - filter: "row_id %% 7 != 3 and (row_id %% 1000 < 600 or label == 1)"
PIPELINE`

var windowPipelines = map[string]string{
	"columns": `
  - select: [row_id, label, dense_0, cat_0, seq_0, query_opt]
`,
	"groups": `
  - sample: {key: row_id, rates: [{when: "label == 1", rate: 1.0}, {rate: 0.5}], weight: weight}
  - stack: {output: dense, columns: [dense_0, dense_1, dense_2]}
  - jagged: {output: sparse, keys: [cat_0, cat_opt, seq_opt, {column: seq_0, key: hist, max_length: 20}, {column: cat_1, weights: weight}], nulls: fill}
  - select: [row_id, label, weight, dense, sparse, seq_1, query_opt]
`,
}

// Later epochs take cached units by reference (cache.go), and the shuffle
// window points at rows instead of copying them where it can
// (batcher.add). Neither may change a byte of any batch: every cache size
// (none, some units, all) and every window (none, smaller than a unit,
// spanning several) gives the batches of the run without a cache. A
// cached batch that a worker refilled, or a window that read a buffer the
// pool had handed on, would show here as other rows in later epochs.
func TestCacheAndWindowByReference(t *testing.T) {
	data, _ := filepath.Abs("../testdata/small")
	for name, pipeline := range windowPipelines {
		for _, buf := range []int{0, 500, 2000} {
			src := strings.NewReplacer("DATA", data, "PIPELINE", pipeline).Replace(fmt.Sprintf(windowJob, buf))
			t.Run(fmt.Sprintf("%s/buffer=%d", name, buf), func(t *testing.T) { sameWithCache(t, src) })
		}
	}
}

// sameWithCache runs src with a window that copies every row (the
// reference), then as usual without a cache, with one that holds some
// units and with one that holds all, and compares every batch's bytes.
func sameWithCache(t *testing.T, src string) {
	old := engine.SetCopyWindowForTest(true)
	want := runTensors(t, src, nil)
	engine.SetCopyWindowForTest(old)
	if len(want[0]) == 0 {
		t.Fatal("no batches")
	}
	for _, size := range []string{"", "64KiB", "1GiB"} {
		job := src
		if size != "" {
			job += "cache: {max_memory: " + size + "}\n"
		}
		got := runTensors(t, job, nil)
		for r := range want {
			if len(got[r]) != len(want[r]) {
				t.Fatalf("cache %q, rank %d: %d batches, want %d", size, r, len(got[r]), len(want[r]))
			}
			for i := range want[r] {
				if !bytes.Equal(got[r][i], want[r][i]) {
					t.Fatalf("cache %q, rank %d: batch %d differs from the run whose window copies every row", size, r, i)
				}
			}
		}
	}
}

// BenchmarkWindow measures the producer's whole CPU cost of a shuffled
// job whose window points at rows (as it runs) against the same job with
// a window that copies every row (as it ran before), alternating the two
// in one run (ABBA). "cached" runs four epochs from the unit cache after
// the first, where the window names cached outputs and copies nothing;
// "first" is one epoch, where it copies the rows a window holds past
// their unit's add. A goroutine of the process drains the ring.
//
//	go test -run '^$' -bench '^BenchmarkWindow$' -benchtime 3x -count 3 ./engine/
func BenchmarkWindow(b *testing.B) {
	base := shuffledAllColumns(b)
	for _, run := range []struct{ name, job string }{
		{"cached", base + "epochs: 5\ncache: {max_memory: 4GiB}\n"},
		{"first", base + "epochs: 1\n"},
	} {
		b.Run(run.name, func(b *testing.B) {
			defer engine.SetCopyWindowForTest(false)
			// 0: pointing, 1: copying.
			cpu := abbaCPU(b, run.job, func(k int) { engine.SetCopyWindowForTest(k == 1) })
			b.ReportMetric(float64(cpu[0].Milliseconds())/float64(b.N), "cpu-ms-pointing/job")
			b.ReportMetric(float64(cpu[1].Milliseconds())/float64(b.N), "cpu-ms-copying/job")
			b.ReportMetric(float64(cpu[0])/float64(cpu[1]), "pointing/copying")
		})
	}
}

// BenchmarkCacheKeep measures the producer's whole CPU cost of a
// two-epoch job whose unit cache keeps the first epoch's buffers (as it
// runs) against the same job storing copies of them (as it ran before),
// alternating the two in one run (ABBA). The second epoch comes from the
// cache either way.
//
//	go test -run '^$' -bench '^BenchmarkCacheKeep$' -benchtime 4x -count 3 ./engine/
func BenchmarkCacheKeep(b *testing.B) {
	job := shuffledAllColumns(b) + "epochs: 2\ncache: {max_memory: 4GiB}\n"
	defer engine.SetCopyCacheForTest(false)
	// 0: keeping, 1: copying.
	cpu := abbaCPU(b, job, func(k int) { engine.SetCopyCacheForTest(k == 1) })
	b.ReportMetric(float64(cpu[0].Milliseconds())/float64(b.N), "cpu-ms-keeping/job")
	b.ReportMetric(float64(cpu[1].Milliseconds())/float64(b.N), "cpu-ms-copying/job")
	b.ReportMetric(float64(cpu[0])/float64(cpu[1]), "keeping/copying")
}

// abbaCPU runs job b.N times each way, alternating which way goes first
// (ABBA), set(k) choosing way k before each run, and returns each way's
// total CPU time.
func abbaCPU(b *testing.B, job string, set func(k int)) (cpu [2]time.Duration) {
	for i := range b.N {
		for n := range 2 {
			k := n ^ i&1
			set(k)
			cpu[k] += runJobCPU(b, job)
		}
	}
	return cpu
}

// shuffledAllColumns writes 400k rows of every datagen column in
// 65,536-row units and returns a job over them, without its epochs: a
// 16,384-row shuffle window, 2 workers.
func shuffledAllColumns(b *testing.B) string {
	cfg := datagen.DefaultConfig()
	cfg.Rows, cfg.RowGroupRows, cfg.Files = 400_000, 65536, 2
	data := b.TempDir()
	if _, err := datagen.Write(context.Background(), data, cfg); err != nil {
		b.Fatal(err)
	}
	return fmt.Sprintf("inputs: [%q]\nbatch: {size: 2048}\nseed: 1\nshuffle: {units: true, buffer: 16384}\ndecode: {workers: 2}\n", data)
}
