package decode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/datagen"
)

// Benchmark data: datagen's default recommender table (32 dense, 8 cats,
// 2 sequences of mean length 50, a query string; v1 pages of 1 MiB), made
// once per codec into a temporary directory that TestMain removes.
// LASTMILE_BENCH_ROWS overrides the row count (default 8 row groups of
// 131072 rows, so that two workers get equal shares). LASTMILE_BENCH_DIR
// names a directory to keep the data in across runs instead (reused when
// it already holds a table of that many rows).

var bench struct {
	once  sync.Map // codec → *sync.Once
	dir   string
	plans sync.Map // codec → *Plan
	mu    sync.Mutex
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bench.dir != "" {
		os.RemoveAll(bench.dir)
	}
	os.Exit(code)
}

func benchRows() int64 {
	if s := os.Getenv("LASTMILE_BENCH_ROWS"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
			return n
		}
	}
	return 8 * 131072
}

func benchPlan(b testing.TB, codec string) *Plan {
	b.Helper()
	o, _ := bench.once.LoadOrStore(codec, new(sync.Once))
	o.(*sync.Once).Do(func() {
		bench.mu.Lock()
		keep := os.Getenv("LASTMILE_BENCH_DIR")
		if bench.dir == "" && keep != "" {
			keepDir = keep
		}
		if bench.dir == "" && keepDir == "" {
			d, err := os.MkdirTemp("", "lastmile-decode-bench-")
			if err != nil {
				b.Fatal(err)
			}
			bench.dir = d
		}
		bench.mu.Unlock()
		cfg := datagen.DefaultConfig()
		cfg.Rows = benchRows()
		cfg.Compression = codec
		dir := filepath.Join(bench.dir, codec)
		if keepDir != "" {
			dir = filepath.Join(keepDir, fmt.Sprintf("%s-%d", codec, cfg.Rows))
		}
		if _, err := os.Stat(filepath.Join(dir, cfg.FileName(0))); err != nil || keepDir == "" {
			if _, err := datagen.Write(context.Background(), dir, cfg); err != nil {
				b.Fatal(err)
			}
		}
		plan, err := PlanFiles(context.Background(), []string{dir}, PlanOptions{})
		if err != nil {
			b.Fatal(err)
		}
		bench.plans.Store(codec, plan)
	})
	p, ok := bench.plans.Load(codec)
	if !ok {
		b.Fatal("benchmark data not generated")
	}
	return p.(*Plan)
}

var keepDir string

var benchCodecs = []string{"snappy", "zstd"}

// BenchmarkDecode decodes every unit once per iteration on one goroutine
// with a reused decoder and batch. Bytes are output bytes.
func BenchmarkDecode(b *testing.B) {
	for _, path := range Paths {
		for _, codec := range benchCodecs {
			b.Run(fmt.Sprintf("%v/%s", path, codec), func(b *testing.B) {
				plan := benchPlan(b, codec)
				dec, err := NewUnitDecoder(path, plan.Fields)
				if err != nil {
					b.Fatal(err)
				}
				defer dec.Close()
				var batch column.Batch
				pass := func() int64 {
					var n int64
					for _, u := range plan.Units {
						if err := dec.Decode(context.Background(), u, &batch); err != nil {
							b.Fatal(err)
						}
						n += int64(batch.Bytes())
					}
					return n
				}
				b.SetBytes(pass()) // also warms buffers and the page cache
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := cpuSeconds()
				for b.Loop() {
					pass()
				}
				reportCPU(b, cpu0)
				b.ReportMetric(float64(plan.Rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

// BenchmarkDecompressOnly is the floor: the same projected pages read and
// decompressed into a reused buffer. Bytes are decompressed bytes.
func BenchmarkDecompressOnly(b *testing.B) {
	for _, codec := range benchCodecs {
		b.Run(codec, func(b *testing.B) {
			plan := benchPlan(b, codec)
			d := NewDecoder(plan.Fields)
			defer d.Close()
			pass := func() int64 {
				var n int64
				for _, u := range plan.Units {
					m, err := d.DecompressOnly(context.Background(), u)
					if err != nil {
						b.Fatal(err)
					}
					n += m
				}
				return n
			}
			b.SetBytes(pass())
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuSeconds()
			for b.Loop() {
				pass()
			}
			reportCPU(b, cpu0)
		})
	}
}

// BenchmarkDecodeWorkers runs the production decoder on 1 and 2
// goroutines, one unit per goroutine at a time; compare ns/op.
func BenchmarkDecodeWorkers(b *testing.B) {
	for _, codec := range benchCodecs {
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/w%d", codec, workers), func(b *testing.B) {
				plan := benchPlan(b, codec)
				decs := make([]*Decoder, workers)
				batches := make([]column.Batch, workers)
				for i := range decs {
					decs[i] = NewDecoder(plan.Fields)
					defer decs[i].Close()
				}
				var out atomic.Int64
				pass := func() {
					var next atomic.Int64
					var wg sync.WaitGroup
					for w := range workers {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for {
								i := int(next.Add(1) - 1)
								if i >= len(plan.Units) {
									return
								}
								if err := decs[w].Decode(context.Background(), plan.Units[i], &batches[w]); err != nil {
									b.Error(err)
									return
								}
								out.Add(int64(batches[w].Bytes()))
							}
						}()
					}
					wg.Wait()
				}
				pass()
				b.SetBytes(out.Load())
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := cpuSeconds()
				for b.Loop() {
					pass()
				}
				reportCPU(b, cpu0)
			})
		}
	}
}

// reportCPU adds the process CPU time per iteration: on a shared machine
// it is steadier than wall time, which other processes stretch.
func reportCPU(b *testing.B, cpu0 float64) {
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N)*1e3, "cpu-ms/op")
}
