package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/lastmile/lastmile/datagen"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/expr"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// A feature group's reference, built row by row from datagen's values:
// what one row contributes to a stack (its N values) or to each key of a
// jagged group (its ids).
type stackRef func(r *datagen.Row) []float64
type keyRef func(r *datagen.Row) []int64

func bf16(v float32) float64 { // torch's rounding: to nearest, ties to even
	b := math.Float32bits(v)
	b = (b + 0x7fff + (b>>16)&1) &^ 0xffff
	return float64(math.Float32frombits(b))
}

func hashed(ids []int64, m uint64) []int64 {
	out := make([]int64, len(ids))
	for i, v := range ids {
		out[i] = int64(expr.HashInt(v) % m)
	}
	return out
}

func last(ids []int64, n int) []int64  { return ids[max(len(ids)-n, 0):] }
func first(ids []int64, n int) []int64 { return ids[:min(len(ids), n)] }

// groupLayoutCases are TestGroupLayout's jobs: a group op, and the
// reference of what one row contributes to it.
var groupLayoutCases = []struct {
	name  string
	ops   string
	stack stackRef
	keys  []keyRef
}{
	{"stack float32, nulls filled", "- stack: {output: g, columns: [dense_0, dense_opt, label], nulls: fill, fill: -2}",
		func(r *datagen.Row) []float64 {
			opt := float64(r.DenseOpt)
			if !r.DenseOptValid {
				opt = -2
			}
			return []float64{float64(r.Dense[0]), opt, float64(r.Label)}
		}, nil},
	{"stack float32 of 10 columns", "- stack: {output: g, columns: [dense_7, dense_6, dense_5, dense_4, dense_3, dense_2, dense_1, dense_0, label, cat_0]}",
		func(r *datagen.Row) []float64 {
			var out []float64
			for j := 7; j >= 0; j-- {
				out = append(out, float64(r.Dense[j]))
			}
			return append(out, float64(r.Label), float64(float32(r.Cats[0])))
		}, nil},
	{"stack bfloat16", "- stack: {output: g, columns: [dense_1, dense_0], dtype: bfloat16}",
		func(r *datagen.Row) []float64 { return []float64{bf16(r.Dense[1]), bf16(r.Dense[0])} }, nil},
	{"stack int64", "- stack: {output: g, columns: [cat_1, label, cat_opt], dtype: int64, nulls: fill}",
		func(r *datagen.Row) []float64 {
			opt := float64(r.CatOpt)
			if !r.CatOptValid {
				opt = 0
			}
			return []float64{float64(r.Cats[1]), float64(r.Label), opt}
		}, nil},
	{"jagged", `- jagged:
      output: g
      nulls: fill
      keys:
        - cat_0
        - cat_opt
        - {column: seq_0, key: recent, max_length: 5}
        - {column: seq_opt, max_length: 3, truncate: right, hash_mod: 1000}
        - {column: seq_1, hash_mod: 77}
        - {column: query, hash_mod: 65536}`, nil, []keyRef{
		func(r *datagen.Row) []int64 { return []int64{r.Cats[0]} },
		func(r *datagen.Row) []int64 {
			if !r.CatOptValid {
				return nil
			}
			return []int64{r.CatOpt}
		},
		func(r *datagen.Row) []int64 { return last(r.Seqs[0], 5) },
		func(r *datagen.Row) []int64 {
			if !r.SeqOptValid {
				return nil
			}
			return hashed(first(r.SeqOpt, 3), 1000)
		},
		func(r *datagen.Row) []int64 { return hashed(r.Seqs[1], 77) },
		func(r *datagen.Row) []int64 { return []int64{int64(expr.HashBytes([]byte(r.Query)) % 65536)} },
	}},
}

// TestGroupLayout runs jobs with feature groups and checks every batch's
// group tensors against the reference built row by row for the batch's
// row ids: the [B, N] stack in each dtype, and the jagged group's values
// key-major, offsets and lengths, with nulls, empty lists, truncation and
// hashing, through shuffling and batches that span units.
func TestGroupLayout(t *testing.T) {
	gen := datagen.NewGenerator(fixtureConfig(t))
	for _, tc := range groupLayoutCases {
		t.Run(tc.name, func(t *testing.T) {
			src := "inputs: [DATA]\nbatch: {size: 300, last: pad}\nworld_size: 2\nepochs: 1\nseed: 3\n" +
				"shuffle: {units: true, buffer: 1000}\npipeline:\n  " + tc.ops + "\n"
			batches := runGroups(t, src)
			var row datagen.Row
			for bi, b := range batches {
				if tc.stack != nil {
					var want []float64
					for _, id := range b.ids {
						gen.Fill(id, &row)
						want = append(want, tc.stack(&row)...)
					}
					if !slices.Equal(b.dense, want) {
						t.Fatalf("batch %d: stack %v\nwant %v", bi, b.dense[:min(12, len(b.dense))], want[:min(12, len(want))])
					}
					continue
				}
				var vals, offs, lens []int64
				offs = append(offs, 0)
				for _, key := range tc.keys {
					for _, id := range b.ids {
						gen.Fill(id, &row)
						ids := key(&row)
						vals = append(vals, ids...)
						lens = append(lens, int64(len(ids)))
						offs = append(offs, int64(len(vals)))
					}
				}
				if !slices.Equal(b.vals, vals) || !slices.Equal(b.offs, offs) || !slices.Equal(b.lens, lens) {
					t.Fatalf("batch %d: jagged group differs from the reference: %d/%d values, %d/%d offsets, %d/%d lengths",
						bi, len(b.vals), len(vals), len(b.offs), len(offs), len(b.lens), len(lens))
				}
			}
		})
	}
}

// groupBatch is one batch of a group job as read from its ring.
type groupBatch struct {
	ids              []int64
	dense            []float64
	vals, offs, lens []int64
}

// runGroups runs src (with its pipeline ending in a group named g) with
// row_id kept beside it, reads every rank's ring and returns the batches.
func runGroups(t *testing.T, src string) []groupBatch {
	t.Helper()
	dir := t.TempDir()
	abs, _ := filepath.Abs("../testdata/small")
	src = strings.ReplaceAll(src, "DATA", abs)
	src += "  - select: [row_id, g]\n"
	src += fmt.Sprintf("ring: {dir: %q, name: r, slots: 3}\ndecode: {workers: 3, max_unit_rows: 700}\n", dir)
	job, err := spec.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var out []groupBatch
	var errs []error
	var wg sync.WaitGroup
	_, err = engine.Run(context.Background(), job, engine.Options{Ready: func(rings []string) {
		for _, name := range rings {
			wg.Add(1)
			go func() {
				defer wg.Done()
				bs, err := readGroups(dir, name)
				mu.Lock()
				defer mu.Unlock()
				out, errs = append(out, bs...), append(errs, err)
			}()
		}
	}})
	wg.Wait()
	if err := errors.Join(append(errs, err)...); err != nil {
		t.Fatal(err)
	}
	if len(out) < 10 {
		t.Fatalf("%d batches", len(out))
	}
	return out
}

func readGroups(dir, name string) ([]groupBatch, error) {
	c, err := shm.Open(dir, name)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var out []groupBatch
	for {
		b, err := c.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		g := groupBatch{ids: slices.Clone(i64(b.Tensor("row_id", shm.RoleDense).Data))}
		if d := b.Tensor("g", shm.RoleDense); d != nil {
			for k := range len(d.Data) / int(d.DType.Size()) {
				g.dense = append(g.dense, element(d, k))
			}
		} else {
			g.vals = slices.Clone(i64(b.Tensor("g", shm.RoleValues).Data))
			g.offs = slices.Clone(i64(b.Tensor("g", shm.RoleOffsets).Data))
			g.lens = slices.Clone(i64(b.Tensor("g", shm.RoleLengths).Data))
		}
		out = append(out, g)
		c.Release()
	}
}

func i64(b []byte) []int64 {
	return unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)
}

// element returns element k of a dense tensor as a float64.
func element(t *shm.Tensor, k int) float64 {
	switch t.DType {
	case shm.Float32:
		return float64(math.Float32frombits(uint32(t.Data[4*k]) | uint32(t.Data[4*k+1])<<8 | uint32(t.Data[4*k+2])<<16 | uint32(t.Data[4*k+3])<<24))
	case shm.BFloat16:
		return float64(math.Float32frombits((uint32(t.Data[2*k]) | uint32(t.Data[2*k+1])<<8) << 16))
	case shm.Int64:
		return float64(i64(t.Data)[k])
	}
	panic(fmt.Sprintf("dtype %v", t.DType))
}

// BenchmarkStackJob measures the producer's whole CPU cost (decode, ops,
// shuffle, pack, publish) of a job that hands 32 float32 columns to its
// trainer as 32 fields, and of the same job stacking them into one
// [B, 32] field, alternating the two in the same run (each first every
// other time, which cancels the order's bias), with a shuffle buffer (the
// packer gathers rows from the window) and without (it transposes units
// in order). It reports the CPU time of the process per job of each and
// their ratio. The consumer, a goroutine that takes and releases each
// batch, runs in the process too; it validates one tensor a batch for the
// stack and 32 for the columns.
//
//	go test -run '^$' -bench StackJob -benchtime 20x -count 3 ./engine/
func BenchmarkStackJob(b *testing.B) {
	cfg := datagen.DefaultConfig()
	cfg.Rows, cfg.RowGroupRows, cfg.Files, cfg.Cats, cfg.Seqs = 400_000, 65536, 2, 0, 0
	data := b.TempDir()
	if _, err := datagen.Write(context.Background(), data, cfg); err != nil {
		b.Fatal(err)
	}
	cols := make([]string, cfg.Dense)
	for j := range cols {
		cols[j] = fmt.Sprintf("dense_%d", j)
	}
	for _, shuffle := range []int{16384, 0} {
		b.Run(fmt.Sprintf("shuffle=%d", shuffle), func(b *testing.B) {
			base := fmt.Sprintf("inputs: [%q]\ncolumns: [%s]\nbatch: {size: 4096}\nseed: 1\nshuffle: {units: true, buffer: %d}\ndecode: {workers: 2}\n",
				data, strings.Join(cols, ", "), shuffle)
			// Both jobs run a pipeline, so that they decode and run ops alike.
			jobs := []string{base + "pipeline:\n  - select: [" + strings.Join(cols, ", ") + "]\n",
				base + "pipeline:\n  - stack: {output: dense, columns: [" + strings.Join(cols, ", ") + "]}\n"}
			var cpu [2]time.Duration
			for i := range b.N {
				for n := range jobs {
					k := n ^ i&1 // ABBA: each variant runs first every other time
					cpu[k] += runJobCPU(b, jobs[k])
				}
			}
			b.ReportMetric(float64(cpu[0].Milliseconds())/float64(b.N), "cpu-ms-columns/job")
			b.ReportMetric(float64(cpu[1].Milliseconds())/float64(b.N), "cpu-ms-stack/job")
			b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "stack/columns")
		})
	}
}

// runJobCPU runs the job of src into a ring that a goroutine drains and
// returns the CPU time the process used meanwhile.
func runJobCPU(b *testing.B, src string) time.Duration {
	dir := b.TempDir()
	job, err := spec.Parse("b.yaml", []byte(src+fmt.Sprintf("ring: {dir: %q, name: r, slots: 4}\n", dir)))
	if err != nil {
		b.Fatal(err)
	}
	start := processCPU()
	var wg sync.WaitGroup
	var cerr error
	_, err = engine.Run(context.Background(), job, engine.Options{Ready: func(rings []string) {
		wg.Add(1)
		go func() { defer wg.Done(); cerr = drain(dir, rings[0]) }()
	}})
	wg.Wait()
	cpu := processCPU() - start
	if err := errors.Join(err, cerr); err != nil {
		b.Fatal(err)
	}
	return cpu
}

func drain(dir, name string) error {
	c, err := shm.Open(dir, name)
	if err != nil {
		return err
	}
	defer c.Close()
	for {
		if _, err := c.Next(context.Background()); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		c.Release()
	}
}

// processCPU is the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
