// Package bench measures what lastmile can do on this machine, each figure
// as a ratio to a reference measured in the same run: ring handoff against
// memcpy into shared memory, decode against decompression of the same
// pages, two workers against one. `lastmile bench` prints its Report.
// MeasurePlan and Validate measure a spec's own pipeline for `lastmile
// plan` (the scaling curve under a CPU limit, simulated trainers), which
// package plan turns into cores, peers and memory per GPU.
//
// bench owns no mutable globals and defines no flags (cmd binds them). It
// may import engine and the leaf packages; it must never import cmd or
// daemon.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/lastmile/lastmile/cpus"
	"github.com/lastmile/lastmile/datagen"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/shm"
)

// Config says what to measure.
type Config struct {
	// ShmDir holds the benchmark rings ("" is shm.DefaultDir()).
	ShmDir string
	// Data is a directory of sample Parquet; when it holds none, Run
	// generates Rows rows with Compression into it.
	Data        string
	Rows        int64
	Compression string
	// Paths are the decode paths to compare (default all).
	Paths []decode.Path
	// Payload is the bytes per batch of the handoff (default 8 MiB), Slots
	// the ring's slots (default 4), Batches the handoff batches (default
	// enough for about 4 GiB).
	Payload, Slots, Batches int
	// Repeats is how many times each measurement runs; the best counts
	// (default 3).
	Repeats int
	// Consumer returns the command that runs the handoff consumer in
	// another process: it must call shm.RunHandoffConsumer(dir, name).
	Consumer func(dir, name string) *exec.Cmd
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// DefaultConfig returns the configuration `lastmile bench` starts from.
func DefaultConfig() Config {
	return Config{Rows: 1 << 20, Compression: "snappy", Payload: 8 << 20, Slots: 4, Repeats: 3,
		Paths: []decode.Path{decode.PathOwn, decode.PathParquetGo, decode.PathArrow}}
}

// Target is one goal and whether this run met it.
type Target struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Op     string  `json:"op"` // ">=" or "<="
	Target float64 `json:"target"`
	Met    bool    `json:"met"`
	// Info marks a figure reported beside a target, against a reference
	// the target does not name; Met is not meaningful for it.
	Info bool `json:"info,omitempty"`
}

// Report is the outcome of Run.
type Report struct {
	Machine struct {
		NumCPU     int     `json:"num_cpu"`
		GOMAXPROCS int     `json:"gomaxprocs"`
		Available  int     `json:"available_cpus"`
		Quota      float64 `json:"cgroup_quota,omitempty"`
		GoVersion  string  `json:"go_version"`
	} `json:"machine"`
	Data struct {
		Dir         string `json:"dir"`
		Files       int    `json:"files"`
		Rows        int64  `json:"rows"`
		Units       int    `json:"units"`
		Columns     int    `json:"columns"`
		Compression string `json:"compression"`
	} `json:"data"`
	// Memcpy is (a): copying a batch into a pre-touched shared mapping.
	Memcpy shm.BenchResult `json:"memcpy"`
	// Handoff is (b): the same bytes through a ring to another process.
	Handoff shm.BenchResult `json:"handoff"`
	// Decode is (c): each path with 1 worker, and the chosen one with 2.
	Decode []decode.Result `json:"decode"`
	// Decompress is (d): decompression alone of the same pages, 1 and 2
	// workers.
	Decompress []decode.Result `json:"decompress"`
	Targets    []Target        `json:"targets"`
}

func (c *Config) defaults() {
	d := DefaultConfig()
	if c.Rows <= 0 {
		c.Rows = d.Rows
	}
	if c.Compression == "" {
		c.Compression = d.Compression
	}
	if len(c.Paths) == 0 {
		c.Paths = d.Paths
	}
	if c.Payload <= 0 {
		c.Payload = d.Payload
	}
	if c.Slots <= 0 {
		c.Slots = d.Slots
	}
	if c.Batches <= 0 {
		c.Batches = max(64, (4<<30)/c.Payload)
	}
	if c.Repeats <= 0 {
		c.Repeats = d.Repeats
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// Run performs the measurements of the spine, (a) to (d), in one process
// and one run, and evaluates the targets.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	r := &Report{}
	r.Machine.NumCPU = runtime.NumCPU()
	r.Machine.GOMAXPROCS = runtime.GOMAXPROCS(0)
	r.Machine.Available = cpus.Available()
	if q, ok := cpus.Quota(); ok {
		r.Machine.Quota = q
	}
	r.Machine.GoVersion = runtime.Version()

	if err := memcpyAndHandoff(ctx, cfg, r); err != nil {
		return nil, err
	}
	if err := decodeAll(ctx, cfg, r); err != nil {
		return nil, err
	}
	r.evaluate()
	return r, nil
}

func memcpyAndHandoff(ctx context.Context, cfg Config, r *Report) error {
	fmt.Fprintf(cfg.Log, "(a) memcpy of %d MiB batches into a pre-touched shared mapping ...\n", cfg.Payload>>20)
	for i := 0; i < cfg.Repeats; i++ {
		m, err := shm.MeasureMemcpy(cfg.ShmDir, cfg.Payload, cfg.Slots, cfg.Batches)
		if err != nil {
			return err
		}
		if m.BytesPerSecond() > r.Memcpy.BytesPerSecond() {
			r.Memcpy = m
		}
	}
	if cfg.Consumer == nil {
		return fmt.Errorf("bench: no consumer command for the handoff")
	}
	fmt.Fprintf(cfg.Log, "(b) ring handoff to a consumer process ...\n")
	for i := 0; i < cfg.Repeats; i++ {
		h, err := handoff(ctx, cfg, i)
		if err != nil {
			return err
		}
		if h.BytesPerSecond() > r.Handoff.BytesPerSecond() {
			r.Handoff = h
		}
	}
	return nil
}

func handoff(ctx context.Context, cfg Config, i int) (shm.BenchResult, error) {
	hc := shm.HandoffConfig{Dir: cfg.ShmDir, Name: fmt.Sprintf("lastmile-bench-%d-%d", os.Getpid(), i),
		Payload: cfg.Payload, Slots: cfg.Slots, Batches: cfg.Batches}
	h, err := shm.StartHandoff(hc)
	if err != nil {
		return shm.BenchResult{}, fmt.Errorf("handoff: %w", err)
	}
	defer h.Close()
	hc = h.Config()
	cmd := cfg.Consumer(hc.Dir, hc.Name)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return shm.BenchResult{}, fmt.Errorf("handoff: start consumer: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := func() (shm.BenchResult, error) {
		if err := h.WaitConsumer(wctx); err != nil {
			return shm.BenchResult{}, err
		}
		if _, err := h.Run(ctx, 2*hc.Slots); err != nil {
			return shm.BenchResult{}, err
		}
		return h.Run(ctx, hc.Batches)
	}()
	cerr := h.Close()
	werr := cmd.Wait()
	if err != nil {
		return res, fmt.Errorf("handoff: %w", err)
	}
	if werr != nil {
		return res, fmt.Errorf("handoff consumer: %w", werr)
	}
	return res, cerr
}

// sampleDir returns data, or when it is "" a directory of generated
// sample data of rows rows, made on first use and kept under $TMPDIR for
// later runs.
func sampleDir(ctx context.Context, data string, rows int64, compression string, log io.Writer) (string, error) {
	dir := data
	if dir == "" {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("lastmile-bench-data-%d-%s", rows, compression))
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.parquet")); len(m) == 0 {
		gc := datagen.DefaultConfig()
		gc.Rows, gc.Compression = rows, compression
		fmt.Fprintf(log, "generating %d rows (%s) in %s ...\n", gc.Rows, gc.Compression, dir)
		if _, err := datagen.Write(ctx, dir, gc); err != nil {
			return "", fmt.Errorf("generate bench data: %w", err)
		}
	}
	return dir, nil
}

func decodeAll(ctx context.Context, cfg Config, r *Report) error {
	dir, err := sampleDir(ctx, cfg.Data, cfg.Rows, cfg.Compression, cfg.Log)
	if err != nil {
		return err
	}
	// Whole row groups: a unit is what a worker decodes at once. (Slicing
	// them at page boundaries would decode straddling pages twice.)
	plan, err := decode.PlanFiles(ctx, []string{dir}, decode.PlanOptions{})
	if err != nil {
		return err
	}
	r.Data.Dir, r.Data.Files, r.Data.Rows, r.Data.Units, r.Data.Columns, r.Data.Compression =
		dir, len(plan.Files), plan.Rows, len(plan.Units), len(plan.Fields), cfg.Compression

	best := func(f func() (decode.Result, error)) (decode.Result, error) {
		var b decode.Result
		for i := 0; i < cfg.Repeats; i++ {
			res, err := f()
			if err != nil {
				return res, err
			}
			if b.Seconds == 0 || res.Seconds < b.Seconds {
				b = res
			}
		}
		return b, nil
	}
	for _, w := range []int{1, 2} {
		fmt.Fprintf(cfg.Log, "(d) decompression alone, %d worker(s) ...\n", w)
		res, err := best(func() (decode.Result, error) { return decode.MeasureDecompress(ctx, plan, w) })
		if err != nil {
			return fmt.Errorf("decompress: %w", err)
		}
		r.Decompress = append(r.Decompress, res)
	}
	for _, p := range cfg.Paths {
		fmt.Fprintf(cfg.Log, "(c) decode, path %v, 1 worker ...\n", p)
		res, err := best(func() (decode.Result, error) { return decode.Measure(ctx, plan, p, 1) })
		if err != nil {
			return fmt.Errorf("decode %v: %w", p, err)
		}
		r.Decode = append(r.Decode, res)
	}
	fmt.Fprintf(cfg.Log, "(c) decode, path %v, 2 workers ...\n", decode.PathOwn)
	res, err := best(func() (decode.Result, error) { return decode.Measure(ctx, plan, decode.PathOwn, 2) })
	if err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	r.Decode = append(r.Decode, res)
	return nil
}

func (r *Report) find(path string, workers int) (decode.Result, bool) {
	for _, d := range append(append([]decode.Result(nil), r.Decode...), r.Decompress...) {
		if d.Path == path && d.Workers == workers {
			return d, true
		}
	}
	return decode.Result{}, false
}

func (r *Report) evaluate() {
	add := func(name string, v float64, op string, target float64) {
		met := v >= target
		if op == "<=" {
			met = v <= target
		}
		r.Targets = append(r.Targets, Target{Name: name, Value: v, Op: op, Target: target, Met: met})
	}
	if m := r.Memcpy.BytesPerSecond(); m > 0 {
		add("ring handoff / memcpy bandwidth", r.Handoff.BytesPerSecond()/m, ">=", 0.60)
	}
	own := decode.PathOwn.String()
	d1, ok1 := r.find(own, 1)
	z1, ok2 := r.find("decompress", 1)
	if ok1 && ok2 && z1.Seconds > 0 {
		add("decode time / decompress-only time (1 worker, "+own+")", d1.Seconds/z1.Seconds, "<=", 1.5)
	}
	d2, ok3 := r.find(own, 2)
	if ok1 && ok3 && d2.Seconds > 0 {
		add("decode throughput, 2 workers / 1 worker", d1.Seconds/d2.Seconds, ">=", 1.9)
	}
}

// WriteTable prints the report's measurements for people (its targets:
// WriteTargets).
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "machine: %d CPUs, GOMAXPROCS %d, %d available to lastmile, %s\n",
		r.Machine.NumCPU, r.Machine.GOMAXPROCS, r.Machine.Available, r.Machine.GoVersion)
	fmt.Fprintf(w, "data: %s: %d files, %d rows, %d units, %d columns, %s\n\n",
		r.Data.Dir, r.Data.Files, r.Data.Rows, r.Data.Units, r.Data.Columns, r.Data.Compression)
	fmt.Fprintf(w, "%-44s %12s %12s\n", "measurement", "MB/s", "MB/s/core")
	fmt.Fprintf(w, "%-44s %12.0f %12s\n", "(a) memcpy into pre-touched shm", r.Memcpy.BytesPerSecond()/1e6, "")
	fmt.Fprintf(w, "%-44s %12.0f %12s\n", "(b) ring handoff, 2 processes", r.Handoff.BytesPerSecond()/1e6, "")
	for _, d := range r.Decode {
		fmt.Fprintf(w, "%-44s %12.0f %12.0f\n", fmt.Sprintf("(c) decode %s, %d worker(s)", d.Path, d.Workers), d.MBps(), d.MBpsPerCore())
	}
	for _, d := range r.Decompress {
		fmt.Fprintf(w, "%-44s %12.0f %12.0f\n", fmt.Sprintf("(d) decompress only, %d worker(s)", d.Workers), d.MBps(), d.MBpsPerCore())
	}
}
