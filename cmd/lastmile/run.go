package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", stderr)
	linger := fs.Bool("linger", true, "after the last batch, wait until consumers have released every batch")
	remove := fs.Bool("remove", false, "remove the rings when done")
	asJSON := fs.Bool("json", false, "print the run's statistics as JSON")
	verbose := fs.Bool("v", false, "log progress to stderr")
	workers := fs.Int("workers", -1, "override decode.workers (0 = automatic)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: lastmile run [flags] SPEC\n\nRuns the job in SPEC (YAML or JSON) in this process, producing into\nshared-memory rings that trainers read (see docs/ring-format.md).\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want one job spec file, got %d arguments", errUsage, fs.NArg())
	}
	job, err := spec.ReadFile(fs.Arg(0))
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
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	st, err := engine.Run(ctx, job, engine.Options{
		Logger: log, Linger: *linger, Remove: *remove,
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
	secs := st.Elapsed.Seconds()
	fmt.Fprintf(stdout, "%d epochs, %d units, %d batches, %d rows, %.1f MB in %.2fs: %.0f rows/s, %.0f MB/s (decode %.2fs across %d workers, pack %.2fs, waited on full rings %.2fs)\n",
		st.Epochs, st.Units, st.Batches, st.Rows, float64(st.Bytes)/1e6, secs,
		float64(st.Rows)/secs, float64(st.Bytes)/1e6/secs, st.Decode.Seconds(), st.Workers, st.Pack.Seconds(), st.FullWait.Seconds())
	return nil
}
