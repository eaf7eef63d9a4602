package engine_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// windowJob keeps rows in uneven runs (the filter), so unit outputs vary
// in size, and packs fixed, nullable and list columns.
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
  - select: [row_id, label, dense_0, cat_0, seq_0, query_opt]
`

// Later epochs take cached units by reference (cache.go), and the shuffle
// window points at rows instead of copying them where it can
// (batcher.add). Neither may change a byte of any batch: every cache size
// (none, some units, all) and every window (none, smaller than a unit,
// spanning several) gives the batches of the run without a cache. A
// cached batch that a worker refilled, or a window that read a buffer the
// pool had handed on, would show here as other rows in later epochs.
func TestCacheAndWindowByReference(t *testing.T) {
	data, _ := filepath.Abs("../testdata/small")
	for _, buf := range []int{0, 500, 2000} {
		src := strings.ReplaceAll(fmt.Sprintf(windowJob, buf), "DATA", data)
		want := runTensors(t, src, nil)
		if len(want[0]) == 0 {
			t.Fatalf("buffer %d: no batches", buf)
		}
		for _, size := range []string{"64KiB", "1GiB"} {
			got := runTensors(t, src+"cache: {max_memory: "+size+"}\n", nil)
			for r := range want {
				if len(got[r]) != len(want[r]) {
					t.Fatalf("buffer %d, cache %s, rank %d: %d batches, want %d", buf, size, r, len(got[r]), len(want[r]))
				}
				for i := range want[r] {
					if !bytes.Equal(got[r][i], want[r][i]) {
						t.Fatalf("buffer %d, cache %s, rank %d: batch %d differs from the run without a cache", buf, size, r, i)
					}
				}
			}
		}
	}
}
