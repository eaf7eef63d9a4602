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
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
)

// runOptions are run's flags and argument once parsed.
type runOptions struct {
	linger, keep, remove bool
	asJSON, verbose      bool
	workers              int
	hosts                engine.Hosts
	cpuProfile           string
	traceFile            string
	specPath             string
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseRunFlags(args, stderr)
	if err != nil {
		return err
	}
	job, err := readJob(ctx, o.specPath)
	if err != nil {
		return err
	}
	if o.workers >= 0 {
		job.Decode.Workers = o.workers
	}
	stopProfile, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	stopTrace, err := startTrace(o.traceFile)
	if err != nil {
		return err
	}
	defer stopTrace()
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("job", job.Name)
	fsys, err := inputFS()
	if err != nil {
		return err
	}
	limitHeap(ctx, job, fsys, log) // a planning error is the run's to report
	prog := new(engine.Progress)
	if o.verbose {
		stop := logProgress(ctx, log, prog, 5*time.Second)
		defer stop()
	}
	st, err := engine.Run(ctx, job, engine.Options{
		Logger: log, Linger: o.linger, Remove: o.remove && !o.keep, FS: fsys, Hosts: o.hosts, Progress: prog,
		Ready: func(rings []string) {
			for _, r := range rings {
				fmt.Fprintf(stderr, "ring ready: %s\n", r)
			}
		},
	})
	if err != nil {
		return err
	}
	if o.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	_, err = fmt.Fprintln(stdout, runSummary(st))
	return err
}

// parseRunFlags parses run's flags and its one argument, the job spec.
func parseRunFlags(args []string, stderr io.Writer) (*runOptions, error) {
	fs := newFlags("run", stderr)
	o := &runOptions{}
	fs.BoolVar(&o.linger, "linger", true, "after the last batch, wait until consumers have released every batch")
	fs.BoolVar(&o.keep, "keep", false, "leave the rings in the ring directory when done, for consumers that come later")
	fs.BoolVar(&o.remove, "remove", true, "") // hidden: -remove=false is the old spelling of -keep
	fs.BoolVar(&o.asJSON, "json", false, "print the run's statistics as JSON")
	fs.BoolVar(&o.verbose, "v", false, "log progress to stderr")
	fs.IntVar(&o.workers, "workers", -1, "decode workers, 0 for automatic (default: the spec's decode.workers)")
	fs.IntVar(&o.hosts.Count, "hosts", 1, "the hosts the job's world_size ranks run on (torchrun's --nnodes): this run serves one host's share")
	fs.IntVar(&o.hosts.Index, "host", 0, "which of the -hosts this is, from 0 (torchrun's --node-rank)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this `file`")
	fs.StringVar(&o.traceFile, "trace", "", "write an execution trace of the run to this `file` (go tool trace)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: lastmile run [flags] SPEC

Runs the job in SPEC (YAML or JSON) in this process, producing into
shared-memory rings that trainers read (see docs/ring-format.md). Once the
consumers have released every batch (or at exit, Ctrl-C included, when
nobody read them) the rings are removed, unless -keep.

Flags:`)
		printFlags(fs, "remove")
	}
	if err := parseArgs(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() != 1 {
		return nil, fmt.Errorf("%w: want one job spec file, got %d arguments", errUsage, fs.NArg())
	}
	o.specPath = fs.Arg(0)
	return o, nil
}

// startCPUProfile starts -cpuprofile's profile into path ("" for none);
// stop ends it and closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	return startToFile(path, pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// startTrace starts -trace's execution trace into path ("" for none);
// stop ends it and closes the file.
func startTrace(path string) (stop func(), err error) {
	return startToFile(path, trace.Start, trace.Stop)
}

// startToFile creates path and starts a recorder writing to it; the
// function it returns stops the recorder, then closes the file.
func startToFile(path string, start func(io.Writer) error, end func()) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		end()
		f.Close()
	}, nil
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
	s := fmt.Sprintf("%d epochs, %d units, %d batches, %d rows, %.1f MB in %.2fs: %.0f rows/s, %.0f MB/s over %.2fs of production "+
		"(decode %.2fs across %d workers, pack %.2fs); waited on trainers %.2fs (full rings %.2fs, final drain %.2fs)",
		st.Epochs, st.Units, st.Batches, st.Rows, float64(st.Bytes)/1e6, st.Elapsed.Seconds(),
		rate(float64(st.Rows)), rate(float64(st.Bytes)/1e6), busy,
		st.Decode.Seconds(), st.Workers, st.Pack.Seconds(), (st.FullWait + st.Drain).Seconds(), st.FullWait.Seconds(), st.Drain.Seconds())
	if st.UnitsPruned > 0 || st.FilesPruned > 0 {
		s += fmt.Sprintf("; the filters left out %s and %s, unread, by their statistics or partition values",
			count(st.UnitsPruned, "unit", "units"), count(st.FilesPruned, "file", "files"))
	}
	if st.RowsRuledOut > 0 {
		s += fmt.Sprintf("; the page index ruled out %d rows of the units read, undecoded", st.RowsRuledOut)
	}
	if st.RowsDeleted > 0 {
		s += fmt.Sprintf("; %d rows an epoch dropped as deleted by the input tables' deletes", st.RowsDeleted)
	}
	if st.ArenaUnits > 0 || st.ArenaFallbacks > 0 {
		s += fmt.Sprintf("; the unit arena took %d units (%d more decoded to the heap, no chunk being free)", st.ArenaUnits, st.ArenaFallbacks)
	}
	return s
}

// logProgress logs the run's progress every period (-v), and the ranks
// whose rings are full: production waits on them, so a rank nobody reads
// stalls every rank. The function it returns stops it.
func logProgress(ctx context.Context, log *slog.Logger, prog *engine.Progress, period time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			stats := prog.RingStats()
			if len(stats) == 0 {
				continue // planning
			}
			var batches uint64
			for _, st := range stats {
				batches += st.Published
			}
			log.Info("progress", "epoch", prog.Epoch.Load(), "batches", batches, "units", prog.UnitsDone.Load())
			if full := fullRanks(stats); len(full) > 0 {
				log.Info("waiting for readers: these ranks' rings are full; every rank's ring must be read (lastmile cat RING), as production serves the ranks together",
					"ranks", fmt.Sprint(full))
			}
		}
	}()
	return func() { cancel(); <-done }
}

// fullRanks returns the ranks whose rings have no slot free for the
// producer.
func fullRanks(stats []shm.ProducerStats) []int {
	var out []int
	for r, st := range stats {
		if st.Slots > 0 && st.Occupancy()+uint64(max(st.Held, 0)) >= uint64(st.Slots) {
			out = append(out, r)
		}
	}
	return out
}
