package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/lastmile/lastmile/datagen"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

// CopiesConfig configures the all-column measurement: what the producer
// spends beyond the decode kernel to put every column of a file into
// rings (docs/benchmarks.md, "Copies").
type CopiesConfig struct {
	Data        string // generated once; default under $TMPDIR
	Rows        int64  // default 2 Mi
	Compression string // default snappy
	ShmDir      string
	Repeats     int // runs of each side, alternating; the fastest counts; default 3
	// Consumer starts the process that reads ring dir/name to its end
	// (lastmile bench -handoff-consumer): the trainer's stand-in, out of
	// this process so that its CPU is not counted as the producer's.
	Consumer func(dir, name string) *exec.Cmd
	Log      io.Writer
}

// CopiesReport is the all-column measurement's result.
type CopiesReport struct {
	Rows    int64 `json:"rows"`
	Columns int   `json:"columns"`
	// KernelCPU is the decode kernel's CPU seconds for every column of
	// every unit on one worker (decode.Measure, the spine's (c)).
	KernelCPU float64 `json:"kernel_cpu_seconds"`
	// ProducerCPU is this process's CPU seconds for one pass of a
	// one-worker job of every column into a ring through the unit arena
	// (ring.arena: decoded where the trainer reads), with a consumer process
	// reading it: the second pass of three, from the moment the job starts
	// its second epoch to the moment it starts its third, in the same
	// steady state as the kernel's figure (decode.Measure decodes a unit
	// before it starts timing). FirstPassCPU is the first pass, job setup
	// and the first allocation of every buffer included.
	ProducerCPU  float64 `json:"producer_cpu_seconds"`
	FirstPassCPU float64 `json:"first_pass_cpu_seconds"`
	// PackSeconds and DecodeSeconds are the three-pass run's own split
	// (engine.Stats), per pass.
	PackSeconds   float64 `json:"pack_seconds"`
	DecodeSeconds float64 `json:"decode_seconds"`
	Ratio         float64 `json:"ratio"` // ProducerCPU / KernelCPU
	Target        Target  `json:"target"`
	// ArenaUnits and ArenaFallbacks are the units of the run that the
	// figures come from decoded into the arena, and to the heap for want
	// of a free chunk.
	ArenaUnits     int `json:"arena_units"`
	ArenaFallbacks int `json:"arena_fallbacks"`
	// CopyingCPU is ProducerCPU without the arena: each batch's rows
	// copied from the heap into its slot (CopyingPack seconds a pass), as
	// every job did before ring.arena and jobs that cannot use it do.
	CopyingCPU  float64 `json:"copying_cpu_seconds"`
	CopyingPack float64 `json:"copying_pack_seconds"`
	Copying     Target  `json:"copying"`
	FirstPass   Target  `json:"first_pass"` // FirstPassCPU / KernelCPU, beside the target
	// CeilingCPU is ProducerCPU with the packing copy of rows in order
	// skipped (engine.Options.BenchSkipCopy; the consumer still reads
	// every byte): what a pass would cost if decoding wrote straight into
	// the slots and that were free, the most decoding into slots could
	// gain (docs/benchmarks.md). Ceiling is CeilingCPU / KernelCPU,
	// beside the target.
	CeilingCPU float64 `json:"ceiling_cpu_seconds"`
	Ceiling    Target  `json:"ceiling"`
}

func (c *CopiesConfig) defaults() {
	if c.Rows <= 0 {
		c.Rows = 2 << 20
	}
	if c.Compression == "" {
		c.Compression = "snappy"
	}
	if c.Data == "" {
		c.Data = filepath.Join(os.TempDir(), fmt.Sprintf("lastmile-bench-copies-%d-%s", c.Rows, c.Compression))
	}
	if c.Repeats <= 0 {
		c.Repeats = 3
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// RunCopies measures, in one run, the producer's CPU for an all-column
// job against the decode kernel's for the same units, alternating the two
// Repeats times; the fastest of each counts.
func RunCopies(ctx context.Context, cfg CopiesConfig) (*CopiesReport, error) {
	cfg.defaults()
	if cfg.Consumer == nil {
		return nil, fmt.Errorf("copies: no consumer command")
	}
	dir := filepath.Join(cfg.Data, "parquet")
	if m, _ := filepath.Glob(filepath.Join(dir, "*.parquet")); len(m) == 0 {
		gc := datagen.DefaultConfig()
		gc.Rows, gc.Files, gc.Compression = cfg.Rows, 1, cfg.Compression
		fmt.Fprintf(cfg.Log, "generating %d rows of Parquet in %s ...\n", gc.Rows, dir)
		if _, err := datagen.Write(ctx, dir, gc); err != nil {
			return nil, err
		}
	}
	plan, err := decode.PlanFiles(ctx, []string{dir}, decode.PlanOptions{})
	if err != nil {
		return nil, err
	}
	text := fmt.Sprintf("version: 1\nname: copies\ninputs: [%q]\nepochs: 3\nbatch: {size: 4096, last: drop}\n"+
		"decode: {workers: 1}\nring: {slots: 4, dir: %q, name: lastmile-bench-copies-%d}\n", dir, ringDir(cfg.ShmDir), os.Getpid())
	job, err := spec.Parse("copies.yaml", []byte(text))
	if err != nil {
		return nil, fmt.Errorf("copies: %w", err)
	}
	r := &CopiesReport{Rows: plan.Rows, Columns: len(plan.Fields)}
	for i := range cfg.Repeats {
		fmt.Fprintf(cfg.Log, "copies: run %d of %d: the decode kernel, %d columns, one worker ...\n", i+1, cfg.Repeats, len(plan.Fields))
		res, err := decode.Measure(ctx, plan, decode.PathOwn, 1)
		if err != nil {
			return nil, err
		}
		if i == 0 || res.CPUSeconds < r.KernelCPU {
			r.KernelCPU = res.CPUSeconds
		}
		for _, side := range []copiesSide{sideArena, sideCopying, sideCeiling} {
			fmt.Fprintf(cfg.Log, "copies: run %d of %d: every column into a ring, one worker, a consumer process: %s ...\n", i+1, cfg.Repeats, side)
			if err := copiesRun(ctx, cfg, job, i == 0, side, r); err != nil {
				return nil, err
			}
		}
	}
	r.Ratio = r.ProducerCPU / r.KernelCPU
	r.Target = Target{Name: "all columns: producer CPU per pass / decode kernel CPU (ring.arena)", Value: r.Ratio, Op: "<=", Target: 1.1,
		Met: r.Ratio <= 1.1}
	copying := r.CopyingCPU / r.KernelCPU
	r.Copying = Target{Name: "  the same without ring.arena (rows copied into slots)", Value: copying, Op: "<=", Target: 1.1,
		Met: copying <= 1.1, Info: true}
	first := r.FirstPassCPU / r.KernelCPU
	r.FirstPass = Target{Name: "  the same, the first pass (job setup, buffers allocated)", Value: first, Op: "<=", Target: 1.1,
		Met: first <= 1.1, Info: true}
	ceil := r.CeilingCPU / r.KernelCPU
	r.Ceiling = Target{Name: "  the same without the packing copy (the most decoding into slots gives)", Value: ceil, Op: "<=", Target: 1.1,
		Met: ceil <= 1.1, Info: true}
	return r, nil
}

// copiesSide is how a copies run puts the rows into slots.
type copiesSide int

const (
	sideArena   copiesSide = iota // decoded into the unit arena (the target)
	sideCopying                   // decoded to the heap, copied into slots
	sideCeiling                   // the same with the copy of rows in order skipped
)

func (s copiesSide) String() string {
	return [...]string{"ring.arena", "rows copied into slots", "the packing copy skipped (BenchSkipCopy)"}[s]
}

// copiesRun runs job (three epochs) once into a ring read by a consumer
// process, noting this process's CPU as each epoch starts, and keeps its
// figures in r where they are the least so far (or first): side's.
func copiesRun(ctx context.Context, cfg CopiesConfig, job *spec.Job, first bool, side copiesSide, r *CopiesReport) error {
	j := *job
	j.Ring.Arena = side == sideArena
	cmd := cfg.Consumer(j.Ring.Dir, j.Ring.Name)
	cmd.Stdout, cmd.Stderr = io.Discard, cfg.Log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("copies: consumer: %w", err)
	}
	defer cmd.Process.Kill()
	// The CPU as epochs 1 and 2 (counted from 0) start, taken by the
	// engine's own hook: a poller would spend CPU that counts here.
	var m [3]float64
	cpu0 := processCPU()
	mark := func(e uint64) {
		if e >= 1 && e <= 2 {
			m[e] = processCPU()
		}
	}
	st, err := engine.Run(ctx, &j, engine.Options{Linger: true, Remove: true, EpochStart: mark, BenchSkipCopy: side == sideCeiling})
	if err != nil {
		return err
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("copies: consumer: %w", err)
	}
	if m[1] == 0 || m[2] == 0 {
		return fmt.Errorf("copies: the run's epochs were not seen starting (%v)", m)
	}
	firstPass, later := m[1]-cpu0, m[2]-m[1]
	switch side {
	case sideCeiling:
		if first || later < r.CeilingCPU {
			r.CeilingCPU = later
		}
	case sideCopying:
		if first || later < r.CopyingCPU {
			r.CopyingCPU, r.CopyingPack = later, st.Pack.Seconds()/3
		}
	case sideArena:
		if first || firstPass < r.FirstPassCPU {
			r.FirstPassCPU = firstPass
		}
		if first || later < r.ProducerCPU {
			r.ProducerCPU, r.PackSeconds, r.DecodeSeconds = later, st.Pack.Seconds()/3, st.Decode.Seconds()/3
			r.ArenaUnits, r.ArenaFallbacks = st.ArenaUnits, st.ArenaFallbacks
		}
	}
	return nil
}

// WriteTable prints the measurement.
func (r *CopiesReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "copies: %d rows, all %d columns, one worker\n", r.Rows, r.Columns)
	fmt.Fprintf(w, "  decode kernel                %8.3f CPU s\n", r.KernelCPU)
	fmt.Fprintf(w, "  producer, ring.arena         %8.3f CPU s a pass  (decoding %.3f s, packing %.3f s; the first pass %.3f s; units %d into the arena, %d to the heap)\n",
		r.ProducerCPU, r.DecodeSeconds, r.PackSeconds, r.FirstPassCPU, r.ArenaUnits, r.ArenaFallbacks)
	fmt.Fprintf(w, "  producer / kernel            %8.3f\n", r.Ratio)
	fmt.Fprintf(w, "  rows copied into slots       %8.3f CPU s a pass, %.3f of the kernel (packing %.3f s)\n",
		r.CopyingCPU, r.CopyingCPU/r.KernelCPU, r.CopyingPack)
	fmt.Fprintf(w, "  without the packing copy     %8.3f CPU s a pass, %.3f of the kernel (the ceiling of decoding into slots)\n",
		r.CeilingCPU, r.CeilingCPU/r.KernelCPU)
}
