package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

type rankStream struct {
	cursors []shm.Cursor
	rows    [][]int64
}

// runStreams runs src and returns every rank's batches.
func runStreams(t *testing.T, src string, workers int, resume []engine.Cursor) []rankStream {
	t.Helper()
	res, _, err := runRings(t, src, workers, engine.Options{Resume: resume})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]rankStream, len(res))
	for r, g := range res {
		out[r] = rankStream{g.batches, g.rows}
	}
	return out
}

// runRings runs src over testdata/small in units of at most 700 rows with
// opts, reading each of its rings in a goroutine of its own as trainers
// would, and returns each ring's batches with the rings' names.
func runRings(t *testing.T, src string, workers int, opts engine.Options) ([]got, []string, error) {
	t.Helper()
	dir := t.TempDir()
	abs, _ := filepath.Abs("../testdata/small")
	src = strings.ReplaceAll(src, "DATA", abs)
	src += fmt.Sprintf("ring: {dir: %q, name: r, slots: 3}\ndecode: {workers: %d, max_unit_rows: 700}\n", dir, workers)
	job, err := spec.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var res []got
	var wg sync.WaitGroup
	opts.Ready = func(rings []string) {
		names, res = rings, make([]got, len(rings))
		for r, name := range rings {
			wg.Add(1)
			go func() { defer wg.Done(); res[r] = consume(context.Background(), dir, name) }()
		}
	}
	_, err = engine.Run(context.Background(), job, opts)
	wg.Wait()
	if err != nil {
		return nil, nil, err
	}
	for r, g := range res {
		if g.err != nil {
			t.Fatalf("ring %s: %v", names[r], g.err)
		}
	}
	return res, names, nil
}

const shuffled = `
inputs: [DATA]
columns: [row_id, seq_0, query_opt]
batch: {size: 300, last: %s}
world_size: 3
epochs: 3
seed: 99
shuffle: {units: true, buffer: %d}
`

func TestShuffleDeterministicAcrossWorkers(t *testing.T) {
	for _, buf := range []int{0, 1000, 4096} {
		src := fmt.Sprintf(shuffled, "drop", buf)
		one := runStreams(t, src, 1, nil)
		many := runStreams(t, src, 4, nil)
		if !reflect.DeepEqual(one, many) {
			t.Fatalf("buffer %d: batches with 1 worker differ from 4 workers", buf)
		}
		// Each row at most once per epoch, all epochs the same row count,
		// and the order differs between epochs.
		perEpoch := map[uint64]map[int64]bool{}
		var firsts [][]int64
		for _, rs := range one {
			for k, c := range rs.cursors {
				m := perEpoch[c.Epoch]
				if m == nil {
					m = map[int64]bool{}
					perEpoch[c.Epoch] = m
				}
				for _, id := range rs.rows[k] {
					if m[id] {
						t.Fatalf("row %d twice in epoch %d", id, c.Epoch)
					}
					m[id] = true
				}
			}
			firsts = append(firsts, rs.rows[0])
		}
		if len(perEpoch) != 3 || len(perEpoch[0]) != 11*900 || len(perEpoch[2]) != 11*900 {
			t.Fatalf("buffer %d: epochs %d, rows in epoch 0: %d", buf, len(perEpoch), len(perEpoch[0]))
		}
		if reflect.DeepEqual(one[0].rows[0], one[0].rows[11]) {
			t.Errorf("buffer %d: epoch 1 starts like epoch 0", buf)
		}
		if buf > 0 && isSorted(one[0].rows[0]) {
			t.Errorf("buffer %d: the first batch is not shuffled", buf)
		}
	}
}

func isSorted(v []int64) bool {
	for i := 1; i < len(v); i++ {
		if v[i] < v[i-1] {
			return false
		}
	}
	return true
}

// Resuming from any per-rank cursors yields exactly the tail of the
// uninterrupted run for every rank.
func TestResumeEqualsUninterruptedTail(t *testing.T) {
	for _, last := range []string{"drop", "pad"} {
		for _, buf := range []int{0, 1000} {
			src := fmt.Sprintf(shuffled, last, buf)
			full := runStreams(t, src, 2, nil)
			perEpoch := len(full[0].cursors) / 3
			cases := [][]engine.Cursor{
				{{Epoch: 0, Batch: 0}, {Epoch: 0, Batch: 0}, {Epoch: 0, Batch: 0}},
				{{Epoch: 0, Batch: 3}, {Epoch: 0, Batch: 2}, {Epoch: 0, Batch: 5}},
				{{Epoch: 1, Batch: 4}, {Epoch: 1, Batch: 4}, {Epoch: 2, Batch: 1}},
				{{Epoch: 1, Batch: uint64(perEpoch)}, {Epoch: 2, Batch: 0}, {Epoch: 1, Batch: uint64(perEpoch - 1)}},
				{{Epoch: 3, Batch: 0}, {Epoch: 2, Batch: uint64(perEpoch - 1)}, {Epoch: 2, Batch: 0}},
			}
			for _, cur := range cases {
				got := runStreams(t, src, 3, cur)
				for r := range full {
					want := tailFrom(full[r], cur[r])
					if !reflect.DeepEqual(got[r], want) {
						t.Fatalf("last %s buffer %d resume %v: rank %d got %d batches, want the uninterrupted tail of %d",
							last, buf, cur, r, len(got[r].cursors), len(want.cursors))
					}
				}
			}
		}
	}
}

// tailFrom is the batches of s from cursor cur on: what resuming there
// must give.
func tailFrom(s rankStream, cur engine.Cursor) rankStream {
	var tail rankStream
	for k, c := range s.cursors {
		if !(engine.Cursor{Epoch: c.Epoch, Batch: c.BatchIndex}).Less(cur) {
			tail.cursors = append(tail.cursors, c)
			tail.rows = append(tail.rows, s.rows[k])
		}
	}
	return tail
}
