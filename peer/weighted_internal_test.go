package peer

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestSpillWeightedByteIdentical: a weighted jagged group (ring format 3)
// gives the same batches through a peer as locally: the peer cuts and
// casts the weights from the job it is sent, and the packer writes them
// from the unit it returns.
func TestSpillWeightedByteIdentical(t *testing.T) {
	f := newFixture(t)
	b, err := os.ReadFile(filepath.Join("..", "testdata", "weighted", "scores.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.data, "scores.parquet")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf(`version: 1
name: weighted
inputs: [%s]
batch: {size: 100, last: drop}
epochs: 1
seed: 9
shuffle: {units: true, buffer: 250}
ring: {slots: 4, dir: %s}
decode: {max_unit_rows: 300, workers: 1}
pipeline:
  - filter: "row_id %% 5 != 1"
  - jagged: {output: sparse, keys: [{column: scores.id, key: scores, max_length: 3, weights: scores.score}, hist]}
  - select: [row_id, sparse]
`, path, f.shm)
	f.localThenSpilled("weighted", text)
}
