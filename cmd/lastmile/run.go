package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"runtime/trace"

	"github.com/lastmile/lastmile/engine"
)

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", stderr)
	linger := fs.Bool("linger", true, "after the last batch, wait until consumers have released every batch")
	keep := fs.Bool("keep", false, "leave the rings in the ring directory when done, for consumers that come later")
	remove := fs.Bool("remove", true, "") // hidden: -remove=false is the old spelling of -keep
	asJSON := fs.Bool("json", false, "print the run's statistics as JSON")
	verbose := fs.Bool("v", false, "log progress to stderr")
	workers := fs.Int("workers", -1, "decode workers, 0 for automatic (default: the spec's decode.workers)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this `file`")
	traceFile := fs.String("trace", "", "write an execution trace of the run to this `file` (go tool trace)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: lastmile run [flags] SPEC

Runs the job in SPEC (YAML or JSON) in this process, producing into
shared-memory rings that trainers read (see docs/ring-format.md). Once the
consumers have released every batch (or at exit, Ctrl-C included, when
nobody read them) the rings are removed, unless -keep.

Flags:`)
		printFlags(fs, "remove")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want one job spec file, got %d arguments", errUsage, fs.NArg())
	}
	job, err := readJob(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	if *workers >= 0 {
		job.Decode.Workers = *workers
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *traceFile != "" {
		f, err := os.Create(*traceFile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return err
		}
		defer trace.Stop()
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("job", job.Name)
	fsys, err := inputFS()
	if err != nil {
		return err
	}
	limitHeap(ctx, job, fsys, log) // a planning error is the run's to report
	st, err := engine.Run(ctx, job, engine.Options{
		Logger: log, Linger: *linger, Remove: *remove && !*keep, FS: fsys,
		Ready: func(rings []string) {
			for _, r := range rings {
				fmt.Fprintf(stderr, "ring ready: %s\n", r)
			}
		},
	})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	_, err = fmt.Fprintln(stdout, runSummary(st))
	return err
}

// runSummary is run's one-line report. Rates are over the time production
// was busy: the waits on trainers (full rings, and the final drain with
// -linger) are the trainers' time, reported apart, and pack time is the
// copying into slots alone.
func runSummary(st engine.Stats) string {
	busy := st.Busy().Seconds()
	rate := func(v float64) float64 {
		if busy <= 0 {
			return 0
		}
		return v / busy
	}
	return fmt.Sprintf("%d epochs, %d units, %d batches, %d rows, %.1f MB in %.2fs: %.0f rows/s, %.0f MB/s over %.2fs of production "+
		"(decode %.2fs across %d workers, pack %.2fs); waited on trainers %.2fs (full rings %.2fs, final drain %.2fs)",
		st.Epochs, st.Units, st.Batches, st.Rows, float64(st.Bytes)/1e6, st.Elapsed.Seconds(),
		rate(float64(st.Rows)), rate(float64(st.Bytes)/1e6), busy,
		st.Decode.Seconds(), st.Workers, st.Pack.Seconds(), (st.FullWait + st.Drain).Seconds(), st.FullWait.Seconds(), st.Drain.Seconds())
}
