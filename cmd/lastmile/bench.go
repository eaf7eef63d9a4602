package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/lastmile/lastmile/bench"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/shm"
)

// benchUsage says everything bench measures; -only picks a part.
const benchUsage = `usage: lastmile bench [flags]

Measures this machine and checks the targets of docs/benchmarks.md, in
parts (-only picks one; all by default):

  spine     (a) memcpy into a pre-touched shared mapping, (b) ring handoff
            to another process, (c) decode per core for each decode path
            (-paths), (d) decompression alone of the same pages
  pipeline  (e) the -pipeline spec end to end against decoding its input
            columns alone, one epoch and three (unit cache), the first
            epoch on v2 pages with the page index too, and the list
            pages holding no kept row (page_skip); (f) rows/s
            against the PyTorch DataLoader baselines (row and batch style,
            0 and 2 workers and as many as the pipeline's decode workers;
            -skip-baselines leaves them out), held to the fastest; (g) the
            trainer's CPU per batch against the leanest baseline's
  spill     the -spill-pipeline spec on 1 core, then on 1 core plus a CPU
            peer (a second process on another core, over mutual TLS): the
            speed-up spilling units to a peer gives (target 1.8x), and the
            requester's CPU to receive a GB of unit output
  copies    every column of a generated file (-copies-rows) into a ring
            on one worker, read by a consumer process: the producer's
            CPU per pass against the decode kernel's for the same units
            (target <= 1.1x), and beside it the same without the packing
            copy (the most decoding into slots could gain)
  memory    peak RSS of a job at N and 10N rows (-memory-rows)
  s3        the spine's sample decoded over S3 on loopback (the versitygw
            test server, built from internal/testservers/s3 on first use)
            against the local files, and the bytes a projected job fetches
            against the files' size (docs/storage.md)

Flags:
`

// benchOptions are bench's flags once parsed.
type benchOptions struct {
	cfg           bench.Config
	pcfg          bench.PipelineConfig
	ccfg          bench.CopiesConfig
	sf            *spillFlags
	asJSON        bool
	paths, only   string
	consumer      string
	consumerCPU   int
	consumerTouch bool
	memRows       int64
	args          []string // after the flags
}

// benchOutput is everything bench measured, as -json prints it.
type benchOutput struct {
	Spine    *bench.Report         `json:"spine,omitempty"`
	Pipeline *bench.PipelineReport `json:"pipeline,omitempty"`
	Spill    *bench.SpillReport    `json:"spill,omitempty"`
	S3       *bench.S3Report       `json:"s3,omitempty"`
	Memory   *memoryReport         `json:"memory,omitempty"`
	Copies   *bench.CopiesReport   `json:"copies,omitempty"`
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseBenchFlags(args, stderr)
	if err != nil {
		return err
	}
	if *o.sf.peer {
		return o.sf.servePeer(ctx, o.args)
	}
	if *o.sf.contend {
		return o.sf.runContender(ctx, stdout)
	}
	if o.consumer != "" {
		return o.runHandoffConsumer(ctx)
	}
	if err := o.parsePaths(); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	o.cfg.Consumer = func(dir, name string) *exec.Cmd {
		return exec.CommandContext(ctx, self, "bench", "-handoff-consumer", dir+"/"+name)
	}
	o.cfg.Log, o.pcfg.Log, o.pcfg.ShmDir = stderr, stderr, o.cfg.ShmDir
	switch o.only {
	case "all", "spine", "pipeline", "spill", "copies", "s3", "memory":
	default:
		return fmt.Errorf("%w: -only must be spine, pipeline, spill, copies, s3, memory or all, got %q", errUsage, o.only)
	}
	out, err := o.measure(ctx, self, stderr)
	if err != nil {
		return err
	}
	return writeBenchOutput(stdout, out, o.asJSON)
}

// parseBenchFlags parses bench's flags, the hidden ones of its helper
// processes included.
func parseBenchFlags(args []string, stderr io.Writer) (*benchOptions, error) {
	fs := newFlags("bench", stderr)
	o := &benchOptions{cfg: bench.DefaultConfig()}
	cfg := &o.cfg
	fs.BoolVar(&o.asJSON, "json", false, "print the report as JSON")
	fs.StringVar(&cfg.Data, "data", "", "sample Parquet directory (default: generated once under $TMPDIR)")
	fs.Int64Var(&cfg.Rows, "rows", cfg.Rows, "rows to generate when there is no data")
	fs.StringVar(&cfg.Compression, "compression", cfg.Compression, "compression of generated data: snappy, zstd, gzip, brotli or none")
	shmDir := shmDirFlag(fs)
	fs.IntVar(&cfg.Payload, "payload", cfg.Payload, "bytes per handed-off batch")
	fs.IntVar(&cfg.Repeats, "repeats", cfg.Repeats, "runs of each measurement; the best counts")
	fs.StringVar(&o.paths, "paths", "own,parquetgo,arrow", "decode paths to compare")
	fs.StringVar(&o.consumer, "handoff-consumer", "", "internal: run as the handoff consumer of ring DIR/NAME")
	fs.IntVar(&o.consumerCPU, "handoff-cpu", -1, "internal: the CPU the handoff consumer runs on (-1: any)")
	fs.BoolVar(&o.consumerTouch, "handoff-touch", true, "internal: the handoff consumer reads every batch (false: releases it unread)")
	o.pcfg = defaultPipelineConfig()
	pcfg := &o.pcfg
	fs.StringVar(&o.only, "only", "all", "what to measure: spine (a-d), pipeline (e-g), spill (the pipeline on 1 core against 1 core plus a CPU peer), copies (all columns: producer CPU against the decode kernel), s3 (S3 on loopback against local files), memory (peak RSS at N and 10N rows) or all")
	o.sf = addSpillFlags(fs)
	fs.Int64Var(&o.memRows, "memory-rows", 400000, "N of the memory measurement: peak RSS over N and 10N rows")
	fs.Int64Var(&o.ccfg.Rows, "copies-rows", 2<<20, "rows of generated data for the all-column (copies) measurement")
	fs.StringVar(&pcfg.Spec, "pipeline", pcfg.Spec, "pipeline spec to measure in (e)-(g)")
	fs.Int64Var(&pcfg.Rows, "pipeline-rows", 1<<20, "rows of generated data for the pipeline measurements")
	fs.StringVar(&pcfg.Compression, "pipeline-compression", "snappy", "compression of the pipeline's generated Parquet: snappy, zstd, gzip, brotli or none")
	fs.BoolVar(&pcfg.SkipBaselines, "skip-baselines", false, "measure only (e): leave out the DataLoader baselines (f) and the trainer's cost (g)")
	fs.IntVar(&pcfg.Repeats, "pipeline-repeats", 1, "rounds of (e): decode alone and the pipeline, in the other order every round (give an even count); each side's best counts")
	fs.Usage = func() {
		fmt.Fprint(stderr, benchUsage)
		printFlags(fs, "dir", "handoff-consumer", "handoff-cpu", "handoff-touch", "spill-peer", "spill-contend", "spill-cpu", "spill-tls", "spill-root")
	}
	if err := parseArgs(fs, args); err != nil {
		return nil, err
	}
	cfg.ShmDir = *shmDir
	o.args = fs.Args()
	return o, nil
}

// runHandoffConsumer is the hidden -handoff-consumer mode: the other end
// of the spine's ring handoff, started by bench itself.
func (o *benchOptions) runHandoffConsumer(ctx context.Context) error {
	i := strings.LastIndexByte(o.consumer, '/')
	if i < 0 {
		return fmt.Errorf("%w: -handoff-consumer wants DIR/NAME", errUsage)
	}
	if o.consumerCPU >= 0 {
		if err := bench.PinProcess(o.consumerCPU); err != nil {
			return err
		}
	}
	if !o.consumerTouch {
		return shm.RunDrainConsumer(ctx, o.consumer[:i], o.consumer[i+1:])
	}
	_, err := shm.RunHandoffConsumer(ctx, o.consumer[:i], o.consumer[i+1:])
	return err
}

// parsePaths reads -paths into the spine's decode paths.
func (o *benchOptions) parsePaths() error {
	o.cfg.Paths = nil
	for _, p := range strings.Split(o.paths, ",") {
		path, err := decode.ParsePath(strings.TrimSpace(p))
		if err != nil {
			return fmt.Errorf("%w: -paths: %v", errUsage, err)
		}
		o.cfg.Paths = append(o.cfg.Paths, path)
	}
	return nil
}

// measure runs the parts -only picks, in this order. self is this binary,
// which the measurements start again as their helper processes.
func (o *benchOptions) measure(ctx context.Context, self string, stderr io.Writer) (*benchOutput, error) {
	var out benchOutput
	var err error
	cfg, only := o.cfg, o.only
	if only == "all" || only == "memory" {
		if out.Memory, err = benchMemory(ctx, self, cfg.ShmDir, o.memRows, stderr); err != nil {
			return nil, fmt.Errorf("memory: %w", err)
		}
	}
	if only == "all" || only == "s3" {
		s3cfg := bench.S3Config{Data: cfg.Data, Rows: cfg.Rows, Compression: cfg.Compression, Log: stderr}
		out.S3, err = bench.RunS3(ctx, s3cfg)
		if err != nil && only == "s3" {
			return nil, fmt.Errorf("s3: %w", err)
		}
		if err != nil {
			fmt.Fprintf(stderr, "s3: not measured: %v\n", err)
		}
	}
	if only == "all" || only == "spine" {
		if out.Spine, err = bench.Run(ctx, cfg); err != nil {
			return nil, err
		}
	}
	if only == "all" || only == "copies" {
		ccfg := o.ccfg
		ccfg.Compression, ccfg.ShmDir, ccfg.Log, ccfg.Consumer = cfg.Compression, cfg.ShmDir, stderr, cfg.Consumer
		if out.Copies, err = bench.RunCopies(ctx, ccfg); err != nil {
			return nil, fmt.Errorf("copies: %w", err)
		}
	}
	if only == "all" || only == "pipeline" {
		if out.Pipeline, err = bench.RunPipeline(ctx, o.pcfg); err != nil {
			return nil, fmt.Errorf("pipeline: %w", err)
		}
	}
	if only == "all" || only == "spill" {
		// Last: it pins this process to one CPU.
		if out.Spill, err = bench.RunSpill(ctx, o.spillConfig(ctx, self, stderr)); err != nil {
			return nil, fmt.Errorf("spill: %w", err)
		}
	}
	return &out, nil
}

// spillConfig completes the spill measurement's config: its helper
// processes are this binary (self) in bench's hidden modes.
func (o *benchOptions) spillConfig(ctx context.Context, self string, stderr io.Writer) bench.SpillConfig {
	sf := o.sf
	sf.cfg.Log, sf.cfg.ShmDir = stderr, o.cfg.ShmDir
	sf.cfg.Compression = o.pcfg.Compression
	sf.cfg.PeerCommand = []string{self, "bench", "-spill-peer"}
	sf.cfg.ContendCommand = []string{self, "bench", "-spill-contend"}
	sf.cfg.Consumer = func(dir, name string, cpu int) *exec.Cmd {
		return exec.CommandContext(ctx, self, "bench", "-handoff-cpu", fmt.Sprint(cpu), "-handoff-touch=false", "-handoff-consumer", dir+"/"+name)
	}
	return sf.cfg
}

// writeBenchOutput prints what bench measured: as JSON, or as tables with
// the answer and targets first.
func writeBenchOutput(stdout io.Writer, out *benchOutput, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if out.Spine != nil || out.Pipeline != nil || out.Spill != nil || out.Copies != nil {
		writeBench(stdout, out.Spine, out.Pipeline, out.Spill, out.Copies)
	}
	if out.S3 != nil {
		fmt.Fprintln(stdout)
		out.S3.WriteTable(stdout)
	}
	if out.Memory != nil {
		fmt.Fprintln(stdout)
		out.Memory.WriteTable(stdout)
	}
	return nil
}

// writeBench prints the answer first, in words, then the measurements,
// then the developer targets of docs/benchmarks.md in their own section.
func writeBench(w io.Writer, spine *bench.Report, pipe *bench.PipelineReport, spill *bench.SpillReport, copies *bench.CopiesReport) {
	fmt.Fprintln(w, "Answer")
	fmt.Fprintln(w, wrap(bench.Answer(spine, pipe, spill), 78))
	fmt.Fprintln(w, "\nMeasurements")
	var targets []bench.Target
	if spine != nil {
		spine.WriteTable(w)
		targets = append(targets, spine.Targets...)
	}
	if pipe != nil {
		fmt.Fprintln(w)
		pipe.WriteTable(w)
		targets = append(targets, pipe.Targets...)
	}
	if spill != nil {
		fmt.Fprintln(w)
		spill.WriteTable(w)
		targets = append(targets, spill.Targets()...)
	}
	if copies != nil {
		fmt.Fprintln(w)
		copies.WriteTable(w)
		targets = append(targets, copies.Target, copies.FirstPass, copies.Copying, copies.Ceiling)
	}
	if len(targets) > 0 {
		fmt.Fprintln(w, "\nDeveloper targets (docs/benchmarks.md)")
		bench.WriteTargets(w, targets)
	}
}
