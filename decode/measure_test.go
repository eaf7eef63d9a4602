package decode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

func TestMeasureSmoke(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.parquet")
	writeFile(t, p, fileSpec{rows: 2000, rowGroupRows: 500, codec: "zstd", pageBytes: 4096})
	plan, err := PlanFiles(context.Background(), []string{p}, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out int64
	for _, path := range Paths {
		for _, w := range []int{1, 2} {
			r, err := Measure(context.Background(), plan, path, w)
			if err != nil {
				t.Fatal(err)
			}
			if r.Rows != 2000 || r.Units != 4 || r.Workers != w || r.OutBytes <= 0 || r.Seconds <= 0 {
				t.Fatalf("%v: %+v", path, r)
			}
			if out == 0 {
				out = r.OutBytes
			} else if r.OutBytes != out {
				t.Fatalf("%v produced %d bytes, own %d", path, r.OutBytes, out)
			}
		}
	}
	r, err := MeasureDecompress(context.Background(), plan, 2)
	if err != nil || r.OutBytes <= 0 {
		t.Fatalf("decompress: %+v %v", r, err)
	}
	if _, err := ParsePath("arrow"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParsePath("x"); err == nil {
		t.Fatal("ParsePath(x) succeeded")
	}
}

// TestMeasureReport prints the figures docs/decode.md quotes. It runs
// only with LASTMILE_MEASURE=1 (it takes minutes), over the benchmark
// table (see bench_test.go), alternating the runs so that load from
// other processes falls on all of them alike, and reports medians of
// LASTMILE_MEASURE_ROUNDS rounds (default 5). LASTMILE_MEASURE_QUICK=1
// leaves out the comparison paths.
func TestMeasureReport(t *testing.T) {
	if os.Getenv("LASTMILE_MEASURE") == "" {
		t.Skip("set LASTMILE_MEASURE=1 to run")
	}
	rounds := 5
	if n, err := strconv.Atoi(os.Getenv("LASTMILE_MEASURE_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	quick := os.Getenv("LASTMILE_MEASURE_QUICK") != "" // own and decompress-only alone
	ctx := context.Background()
	type key struct {
		codec, what string
		workers     int
	}
	runs := map[key][]Result{}
	for _, codec := range benchCodecs {
		plan := benchPlan(t, codec)
		if _, err := Measure(ctx, plan, PathOwn, 1); err != nil { // warm the page cache
			t.Fatal(err)
		}
		for range rounds {
			for _, w := range []int{1, 2} {
				r, err := MeasureDecompress(ctx, plan, w)
				if err != nil {
					t.Fatal(err)
				}
				runs[key{codec, "decompress", w}] = append(runs[key{codec, "decompress", w}], r)
				for _, p := range Paths {
					if (w == 2 || quick) && p != PathOwn {
						continue
					}
					r, err := Measure(ctx, plan, p, w)
					if err != nil {
						t.Fatal(err)
					}
					runs[key{codec, p.String(), w}] = append(runs[key{codec, p.String(), w}], r)
				}
			}
		}
	}
	stat := func(rs []Result, f func(Result) float64) (median, least float64) {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2], v[0]
	}
	cpu := func(r Result) float64 { return r.CPUSeconds }
	wall := func(r Result) float64 { return r.Seconds }
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("rounds %d, load average after: %s\n", rounds, load)
	fmt.Printf("| codec | path | workers | wall s (median / min) | CPU s (median / min) | out MB | MB/s per core (median CPU) | MB/s wall (median) | CPU / decompress CPU (median / min) |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, codec := range benchCodecs {
		for _, what := range []string{"decompress", "own", "parquetgo", "arrow"} {
			for _, w := range []int{1, 2} {
				rs := runs[key{codec, what, w}]
				if len(rs) == 0 {
					continue
				}
				c, cmin := stat(rs, cpu)
				s, smin := stat(rs, wall)
				dc, dcmin := stat(runs[key{codec, "decompress", w}], cpu)
				mb := float64(rs[0].OutBytes) / 1e6
				fmt.Printf("| %s | %s | %d | %.3f / %.3f | %.3f / %.3f | %.0f | %.0f | %.0f | %.2f / %.2f |\n",
					codec, what, w, s, smin, c, cmin, mb, mb/c, mb/s, c/dc, cmin/dcmin)
			}
		}
		w1, w1min := stat(runs[key{codec, "own", 1}], wall)
		w2, w2min := stat(runs[key{codec, "own", 2}], wall)
		c1, _ := stat(runs[key{codec, "own", 1}], cpu)
		c2, _ := stat(runs[key{codec, "own", 2}], cpu)
		d1, d1min := stat(runs[key{codec, "decompress", 1}], wall)
		d2, d2min := stat(runs[key{codec, "decompress", 2}], wall)
		fmt.Printf("\n%s: own 2 workers vs 1: %.2fx wall (medians), %.2fx (minima), CPU per pass %.2fx; decompress-only 2 vs 1: %.2fx (medians), %.2fx (minima)\n\n",
			codec, w1/w2, w1min/w2min, c2/c1, d1/d2, d1min/d2min)
	}
}
