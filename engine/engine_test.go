package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

const fixtureRows = 10000 // testdata/small

type got struct {
	batches []shm.Cursor
	rows    [][]int64 // row_id per batch
	pads    []int     // PadRows per batch
	err     error
}

// runJob runs a job over testdata/small and reads every rank's ring in its
// own goroutine, as trainers would.
func runJob(t *testing.T, src string) (engine.Stats, []got, error) {
	t.Helper()
	return runJobWith(t, src, nil)
}

// runJobWith is runJob with options that extra sets besides.
func runJobWith(t *testing.T, src string, extra func(*engine.Options)) (engine.Stats, []got, error) {
	t.Helper()
	st, res, _, err := runReading(t, src, extra, consume)
	return st, res, err
}

// runReading runs src over testdata/small (DATA; RINGDIR is a temporary
// ring directory, also returned) with options extra sets, and has read
// read every rank's ring in a goroutine of its own, as trainers would.
func runReading[T any](t *testing.T, src string, extra func(*engine.Options),
	read func(ctx context.Context, dir, name string) T) (engine.Stats, []T, string, error) {
	t.Helper()
	dir := t.TempDir()
	abs, _ := filepath.Abs("../testdata/small")
	src = strings.ReplaceAll(src, "DATA", abs)
	src = strings.ReplaceAll(src, "RINGDIR", dir)
	job, err := spec.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	res := make([]T, job.WorldSize)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := engine.Options{
		Linger: true,
		Ready: func(rings []string) {
			for r, name := range rings {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res[r] = read(ctx, dir, name)
				}()
			}
		},
	}
	if extra != nil {
		extra(&opts)
	}
	st, err := engine.Run(ctx, job, opts)
	if err != nil {
		cancel()
	}
	wg.Wait()
	return st, res, dir, err
}

func consume(ctx context.Context, dir, name string) got {
	var g got
	g.err = eachBatch(ctx, dir, name, func(b *shm.Batch) {
		ids := b.Tensor("row_id", shm.RoleDense)
		v := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(ids.Data))), b.Rows)
		g.rows = append(g.rows, append([]int64(nil), v...))
		g.pads = append(g.pads, b.PadRows)
		g.batches = append(g.batches, b.Cursor)
	})
	return g
}

func TestBatchingAndRanks(t *testing.T) {
	cases := []struct {
		name             string
		world, size      int
		last             string
		perRank          int // batches each rank gets
		lastRows         int // rows of the final batch of rank 0 (0: full)
		padded           bool
		workers          int
		distinctRowsSeen int
	}{
		{"one rank keep", 1, 768, "keep", 14, 10000 - 13*768, false, 2, 10000},
		{"one rank drop", 1, 768, "drop", 13, 0, false, 2, 13 * 768},
		{"one rank pad", 1, 768, "pad", 14, 0, true, 1, 10000},
		{"three ranks drop", 3, 512, "drop", 6, 0, false, 3, 18 * 512},
		{"three ranks pad", 3, 512, "pad", 7, 0, true, 2, 10000},
		{"eight ranks drop", 8, 97, "drop", 12, 0, false, 4, 96 * 97},
		{"batch larger than a unit", 2, 3000, "drop", 1, 0, false, 2, 6000},
		{"rows fewer than a step", 4, 3000, "drop", 0, 0, false, 2, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := fmt.Sprintf(`
inputs: [DATA]
columns: [row_id, label, seq_0, query_opt, dense_opt]
batch: {size: %d, last: %s}
world_size: %d
ring: {dir: RINGDIR, name: t, slots: 3}
decode: {workers: %d}
`, tc.size, tc.last, tc.world, tc.workers)
			st, res, err := runJob(t, src)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[int64]int{}
			for r, g := range res {
				if g.err != nil {
					t.Fatalf("rank %d: %v", r, g.err)
				}
				if len(g.batches) != tc.perRank {
					t.Fatalf("rank %d got %d batches, want %d", r, len(g.batches), tc.perRank)
				}
				for k, c := range g.batches {
					if c.Rank != uint32(r) || c.BatchIndex != uint64(k) || c.Epoch != 0 {
						t.Errorf("rank %d batch %d: cursor %+v", r, k, c)
					}
					wantLast := k == tc.perRank-1
					if got := c.Flags&shm.FlagLastInEpoch != 0; got != wantLast {
						t.Errorf("rank %d batch %d: last-in-epoch flag %v, want %v", r, k, got, wantLast)
					}
					rows := g.rows[k]
					want := tc.size
					if tc.lastRows != 0 && wantLast {
						want = tc.lastRows
					}
					if len(rows) != want {
						t.Errorf("rank %d batch %d: %d rows, want %d", r, k, len(rows), want)
					}
					// Batch k of rank r is global batch k*world+r: rows
					// [g*size, g*size+size) of the stream, wrapped for padding.
					gb := int64(k*tc.world + r)
					for j, id := range rows {
						if want := (gb*int64(tc.size) + int64(j)) % fixtureRows; id != want {
							t.Fatalf("rank %d batch %d row %d: row_id %d, want %d", r, k, j, id, want)
						}
						seen[id]++
					}
				}
			}
			if len(seen) != tc.distinctRowsSeen {
				t.Errorf("%d distinct rows, want %d", len(seen), tc.distinctRowsSeen)
			}
			if !tc.padded {
				for id, n := range seen {
					if n != 1 {
						t.Fatalf("row %d seen %d times", id, n)
					}
				}
			}
			if st.Batches != int64(tc.perRank*tc.world) {
				t.Errorf("stats: %d batches", st.Batches)
			}
		})
	}
}

func TestEpochs(t *testing.T) {
	_, res, err := runJob(t, `
inputs: [DATA]
columns: [row_id]
batch: {size: 4096}
epochs: 3
ring: {dir: RINGDIR, name: t}
`)
	if err != nil {
		t.Fatal(err)
	}
	g := res[0]
	if g.err != nil || len(g.batches) != 6 {
		t.Fatalf("got %d batches, err %v", len(g.batches), g.err)
	}
	for i, c := range g.batches {
		if c.Epoch != uint64(i/2) || c.BatchIndex != uint64(i%2) {
			t.Errorf("batch %d: cursor %+v", i, c)
		}
	}
}

func TestBadInputFails(t *testing.T) {
	dir := t.TempDir()
	_, err := spec.Parse("", []byte("inputs: [x]\nbatch: {size: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ input, want string }{
		{"../testdata/corrupt/garbage.parquet", "garbage.parquet"},
		{"../testdata/corrupt/truncated.parquet", "truncated.parquet"},
		{"../testdata/nothing-here", "nothing-here"},
	}
	for _, tc := range cases {
		job, err := spec.Parse("", []byte(fmt.Sprintf("inputs: [%s]\nbatch: {size: 100}\nring: {dir: %s, name: bad}\n", tc.input, dir)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = engine.Run(context.Background(), job, engine.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("input %s: error %v, want one naming %q", tc.input, err, tc.want)
		}
	}
}

// A corrupt page in the middle of the input: the batches before it arrive,
// then the trainer gets the error naming the file.
func TestCorruptPageMidStream(t *testing.T) {
	dir := t.TempDir()
	good, _ := filepath.Abs("../testdata/small/part-00000.parquet")
	bad, _ := filepath.Abs("../testdata/corrupt/badpage.parquet")
	job, err := spec.Parse("", []byte(fmt.Sprintf("inputs: [%s, %s]\ncolumns: [row_id, seq_0]\nbatch: {size: 1000}\nring: {dir: %s, name: mid}\ndecode: {workers: 2}\n", good, bad, dir)))
	if err != nil {
		t.Fatal(err)
	}
	var g got
	var wg sync.WaitGroup
	_, err = engine.Run(context.Background(), job, engine.Options{Ready: func(r []string) {
		wg.Add(1)
		go func() { defer wg.Done(); g = consume(context.Background(), dir, r[0]) }()
	}})
	wg.Wait()
	if err == nil || !strings.Contains(err.Error(), "badpage.parquet") {
		t.Fatalf("run error %v, want one naming badpage.parquet", err)
	}
	if g.err == nil || !strings.Contains(g.err.Error(), "badpage.parquet") {
		t.Fatalf("consumer error %v, want the producer's message naming badpage.parquet", g.err)
	}
	if len(g.batches) < 2 {
		t.Errorf("consumer got %d batches before the error, want the good file's (>= 2)", len(g.batches))
	}
}

// TestEpochStartHook: Options.EpochStart is called once per epoch
// produced, in order, after every batch of the epochs before it was
// packed and before any of its own; a resumed run starts at its cursor's
// epoch.
func TestEpochStartHook(t *testing.T) {
	const src = `
inputs: [DATA]
columns: [row_id]
batch: {size: 4096}
epochs: 3
ring: {dir: RINGDIR, name: t}
`
	tests := []struct {
		name   string
		resume []engine.Cursor
		epochs []uint64
		packed []int64 // batches packed when each call came
	}{
		{"from the start", nil, []uint64{0, 1, 2}, []int64{0, 2, 4}},
		{"resumed mid-epoch", []engine.Cursor{{Epoch: 1, Batch: 1}}, []uint64{1, 2}, []int64{0, 1}},
		{"resumed at an epoch's start", []engine.Cursor{{Epoch: 2}}, []uint64{2}, []int64{0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var prog engine.Progress
			var epochs []uint64
			var packed []int64
			_, res, err := runJobWith(t, src, func(o *engine.Options) {
				o.Progress, o.Resume = &prog, tc.resume
				o.EpochStart = func(e uint64) {
					epochs = append(epochs, e)
					packed = append(packed, prog.Batches.Load())
				}
			})
			if err != nil || res[0].err != nil {
				t.Fatal(err, res[0].err)
			}
			if fmt.Sprint(epochs) != fmt.Sprint(tc.epochs) || fmt.Sprint(packed) != fmt.Sprint(tc.packed) {
				t.Errorf("EpochStart saw epochs %v with %v batches packed; want %v with %v", epochs, packed, tc.epochs, tc.packed)
			}
		})
	}
}

// TestBenchSkipCopy: Options.BenchSkipCopy leaves the values of rows
// that go to a batch in order unwritten (a fresh ring's zeros) and
// changes nothing else: the same batches, cursors and padding, and rows
// gathered through a shuffle window are written as always (only the few
// carried into the next batch in order are not).
func TestBenchSkipCopy(t *testing.T) {
	const plain = `
inputs: [DATA]
columns: [row_id]
batch: {size: 4096, last: pad}
epochs: 2
ring: {dir: RINGDIR, name: t, slots: 8} # every batch in a fresh slot
`
	tests := []struct {
		name      string
		src       string
		unwritten bool
	}{
		{"rows in order", plain, true},
		{"rows through a shuffle window", plain + "shuffle: {buffer: 8192}\nseed: 7\n", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, want, err := runJob(t, tc.src)
			if err != nil || want[0].err != nil {
				t.Fatal(err, want[0].err)
			}
			_, res, err := runJobWith(t, tc.src, func(o *engine.Options) { o.BenchSkipCopy = true })
			if err != nil || res[0].err != nil {
				t.Fatal(err, res[0].err)
			}
			g, w := res[0], want[0]
			if fmt.Sprint(g.batches, g.pads) != fmt.Sprint(w.batches, w.pads) {
				t.Fatalf("cursors and padding %v %v, want %v %v", g.batches, g.pads, w.batches, w.pads)
			}
			// Row ids are distinct and only the first is 0: a written row
			// holds its id, an unwritten one 0.
			written, rows := 0, 0
			for b := range g.rows {
				for i, v := range g.rows[b] {
					rows++
					if v != 0 {
						written++
						if v != w.rows[b][i] {
							t.Fatalf("batch %d row %d is %d, want %d or unwritten", b, i, v, w.rows[b][i])
						}
					}
				}
			}
			switch {
			case tc.unwritten && written > 0:
				t.Errorf("%d row ids written into slots; want none with BenchSkipCopy", written)
			case !tc.unwritten && written < rows/2:
				// Only the carried rows (fewer than a batch's per window)
				// pass in order here.
				t.Errorf("%d of %d gathered rows written; want most", written, rows)
			}
		})
	}
}
