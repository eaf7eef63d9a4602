package peer

import (
	"fmt"
	"testing"
)

// TestSpillVariantsByteIdentical: units computed on a peer give the
// local run's batches with epochs served from the unit cache, last: pad,
// several ranks, a filter that empties whole units and a sample, and
// small slices.
func TestSpillVariantsByteIdentical(t *testing.T) {
	for _, v := range []struct {
		last, cache     string
		buf, mur, world int
	}{
		{"pad", "cache: {max_memory: 1GiB}", 777, 333, 3},
		{"drop", "cache: {max_memory: 64KiB}", 0, 0, 8},
		{"pad", "", 4096, 333, 1},
	} {
		f := newFixture(t)
		text := fmt.Sprintf(`version: 1
name: rv
inputs: [%s]
batch: {size: 97, last: %s}
world_size: %d
epochs: 3
seed: 77
shuffle: {units: true, buffer: %d}
ring: {slots: 4, dir: %s}
decode: {max_unit_rows: %d, workers: 1}
%s
pipeline:
  - filter: "row_id < 2100 or row_id >= 5600"
  - sample: {key: row_id, rates: [{when: "label == 1", rate: 1.0}, {rate: 0.6}], weight: w}
  - map: {user_h: "hash_mod(user_id, 1000)"}
  - sequence: {column: seq_0, length: 5, lengths: seq_0_len}
  - select: [row_id, w, user_h, seq_0, seq_0_len, query]
`, f.data, v.last, v.world, v.buf, f.shm, v.mur, v.cache)
		f.localThenSpilled(fmt.Sprintf("%+v", v), text)
	}
}
