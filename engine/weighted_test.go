package engine_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/lastmile/lastmile/shm"
	"github.com/parquet-go/parquet-go"
)

// weightedRow has an id-score map (a weighted feature), a history of
// unweighted ids, and double scores where the map's are int64.
type weightedRow struct {
	RowID  int64             `parquet:"row_id"`
	Scores map[int64]int64   `parquet:"scores"`
	Prices map[int64]float64 `parquet:"prices"`
	Hist   []int64           `parquet:"hist,list"`
	Item   int64             `parquet:"item"`
	Rating float32           `parquet:"rating"`
}

// TestWeightedJagged: a jagged op whose keys have weights: writes a
// weighted jagged field (ring format 3): the weights key-major beside the
// ids, as float32, cut with the ids, and 1 for the ids of a key without
// weights, through a filter and across row groups; a scalar key's weight
// from a scalar column.
func TestWeightedJagged(t *testing.T) {
	dir := t.TempDir()
	rows := make([]weightedRow, 1500)
	for i := range rows {
		rows[i] = weightedRow{RowID: int64(i), Scores: map[int64]int64{}, Prices: map[int64]float64{},
			Item: int64(i * 7), Rating: float32(i%5) / 4}
		for k := range i % 6 {
			rows[i].Scores[int64(i*10+k)] = int64(k*3 + 1)
			rows[i].Prices[int64(i*10+k)] = float64(k) + 0.25
			rows[i].Hist = append(rows[i].Hist, int64(i*100+k))
		}
	}
	path := filepath.Join(dir, "weighted.parquet")
	if err := parquet.WriteFile(path, rows, parquet.MaxRowsPerRowGroup(400)); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`
inputs: [%s]
batch: {size: 50, last: keep}
ring: {dir: %s, name: weighted}
pipeline:
  - filter: "row_id %% 7 != 3"
  - jagged: {output: sparse, keys: [
      {column: scores.key, key: scores, max_length: 3, weights: scores.value},
      hist,
      {column: prices.key, key: prices, weights: prices.value},
      {column: item, weights: rating}]}
  - select: [row_id, sparse]
`, path, dir)
	seen := 0
	runConsumed(t, src, func(ctx context.Context, ring string) error {
		c, err := shm.Open(dir, ring)
		if err != nil {
			return err
		}
		if h := c.Header(); h.VersionMajor != 3 || !h.Fields[1].Weighted {
			c.Close()
			return fmt.Errorf("ring %d.%d, field %+v; want 3.x and a weighted jagged field", h.VersionMajor, h.VersionMinor, h.Fields[1])
		}
		c.Close()
		var bad error
		err = eachBatch(ctx, dir, ring, func(b *shm.Batch) {
			seen += b.Rows
			if bad == nil {
				bad = checkWeighted(b, rows)
			}
		})
		if bad != nil {
			return bad
		}
		return err
	})
	if want := len(rows) - (len(rows)+3)/7; seen != want {
		t.Fatalf("%d rows, want %d", seen, want)
	}
}

// checkWeighted checks one batch's weighted group against the rows.
func checkWeighted(b *shm.Batch, rows []weightedRow) error {
	i64 := func(d []byte) []int64 { return unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(d))), len(d)/8) }
	ids := i64(b.Tensor("row_id", shm.RoleDense).Data)
	vals := i64(b.Tensor("sparse", shm.RoleValues).Data)
	lens := i64(b.Tensor("sparse", shm.RoleLengths).Data)
	wt := b.Tensor("sparse", shm.RoleWeights)
	w := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(wt.Data))), len(wt.Data)/4)
	if len(w) != len(vals) {
		return fmt.Errorf("%d weights for %d ids", len(w), len(vals))
	}
	v := 0
	for k := range 4 {
		for r, id := range ids {
			row := &rows[id]
			n := int(lens[k*len(ids)+r])
			for j := range n {
				var want float32
				switch k {
				case 0:
					want = float32(row.Scores[vals[v+j]])
				case 1:
					want = 1
				case 2:
					want = float32(row.Prices[vals[v+j]])
				case 3:
					want = row.Rating
				}
				if w[v+j] != want {
					return fmt.Errorf("row %d, key %d, id %d: weight %v, want %v", id, k, vals[v+j], w[v+j], want)
				}
			}
			if k == 3 && (n != 1 || vals[v] != row.Item) {
				return fmt.Errorf("row %d: item ids %v, want [%d]", id, vals[v:v+n], row.Item)
			}
			if k == 0 && n != min(3, len(row.Scores)) {
				return fmt.Errorf("row %d: %d scores, want %d (cut to 3)", id, n, min(3, len(row.Scores)))
			}
			v += n
		}
	}
	return nil
}

var update = flag.Bool("update", false, "rewrite testdata/weighted/scores.parquet instead of checking it")

// scoredRow is the row of testdata/weighted/scores.parquet: an id-score
// list of structs (a weighted feature, as Spark writes one) and a history
// of ids. Row i has i%6 scores, id i*10+k weighing k/2+0.25, and i%4
// history ids i*100+k. python/tests/test_groups.py reads it.
type scoredRow struct {
	RowID  int64      `parquet:"row_id"`
	Scores []scoredID `parquet:"scores,list"`
	Hist   []int64    `parquet:"hist,list"`
}

type scoredID struct {
	ID    int64   `parquet:"id"`
	Score float32 `parquet:"score"`
}

func scoredRows() []scoredRow {
	rows := make([]scoredRow, 1200)
	for i := range rows {
		rows[i].RowID = int64(i)
		for k := range i % 6 {
			rows[i].Scores = append(rows[i].Scores, scoredID{ID: int64(i*10 + k), Score: float32(k)/2 + 0.25})
		}
		for k := range i % 4 {
			rows[i].Hist = append(rows[i].Hist, int64(i*100+k))
		}
	}
	return rows
}

// TestWeightedFixture checks that testdata/weighted/scores.parquet is what
// scoredRows writes (-update rewrites it), and reads its weights back
// through a jagged op.
func TestWeightedFixture(t *testing.T) {
	fixture := filepath.Join("..", "testdata", "weighted", "scores.parquet")
	path := filepath.Join(t.TempDir(), "scores.parquet")
	if *update {
		path = fixture
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := parquet.WriteFile(path, scoredRows(), parquet.MaxRowsPerRowGroup(400)); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatalf("%v (go test ./engine -run TestWeightedFixture -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what scoredRows writes: rewrite it with go test ./engine -run TestWeightedFixture -update", fixture)
	}
	dir := t.TempDir()
	src := fmt.Sprintf(`
inputs: [%s]
batch: {size: 100, last: keep}
ring: {dir: %s, name: fixture}
pipeline:
  - jagged: {output: sparse, keys: [{column: scores.id, key: scores, weights: scores.score}, hist]}
  - select: [row_id, sparse]
`, fixture, dir)
	rows, n := scoredRows(), 0
	runConsumed(t, src, func(ctx context.Context, ring string) error {
		return eachBatch(ctx, dir, ring, func(b *shm.Batch) {
			ids := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b.Tensor("row_id", shm.RoleDense).Data))), b.Rows)
			wt := b.Tensor("sparse", shm.RoleWeights).Data
			w := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(wt))), len(wt)/4)
			v := 0
			for _, id := range ids { // key 0: the scores
				for _, s := range rows[id].Scores {
					if v >= len(w) || w[v] != s.Score {
						n = -1
						return
					}
					v++
				}
			}
			for v < len(w) && w[v] == 1 { // key 1: the history, unweighted
				v++
			}
			if v == len(w) && n >= 0 {
				n += b.Rows
			}
		})
	})
	if n != len(rows) {
		t.Fatalf("%d rows with the fixture's weights, want %d", n, len(rows))
	}
}
