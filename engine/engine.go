package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"slices"
	"time"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/cpus"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/pool"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// Options tune a Run beyond what the job spec says.
type Options struct {
	// Logger receives progress and errors; nil discards them.
	Logger *slog.Logger
	// Ready is called once every ring exists, with their names in rank
	// order, before any batch is produced: consumers may attach from then.
	Ready func(rings []string)
	// Linger keeps Run from returning, after the last batch is published,
	// until every ring's consumer has released every batch or ctx is done.
	// Without it the rings stay behind for late consumers (and are
	// replaced by the next producer of the same name).
	Linger bool
	// Remove unlinks the rings when Run returns.
	Remove bool
	// Resume gives, per rank, the next batch that rank's trainer needs
	// (nil: start at the beginning). Run produces exactly the batches an
	// uninterrupted run would have produced from there on: it starts at
	// the earliest cursor and does not pack a rank's batches before its
	// own.
	Resume []Cursor
	// Progress, if not nil, receives live counters.
	Progress *Progress
	// Gate, if not nil, is called by a worker before it decodes a unit and
	// the returned release after; the daemon uses it to share CPU between
	// jobs by weight. An error stops the run.
	Gate func(ctx context.Context) (release func(), err error)
	// RingOwner is the uid, besides this process's and root, whose ring
	// files may be replaced or adopted (shm.Config.Owner): the job's owner,
	// to whom a daemon gives its rings.
	RingOwner uint32
	// Spill, if not nil, runs units on CPU peers (engine/spill.go); nil
	// runs every unit locally.
	Spill Spill
	// FS is where the job's files (inputs and side tables) come from; nil
	// is decode.OSFS. The daemon passes one that opens them with the job
	// owner's credentials.
	FS decode.FS
	// PlaceRing, if not nil, is called for each rank with the function
	// that creates (or adopts) its ring, and must call it: the daemon
	// runs it under a memory policy that allocates the ring's pages on
	// the NUMA node of the rank's GPU (gpu.OnNode). nil calls it directly.
	PlaceRing func(rank int, create func() error) error
	// Stage, if not nil, sees each packed slot before it is published
	// (stage.go): the daemon's device staging. nil publishes directly.
	Stage Stager
	// EpochStart, if not nil, is called as each epoch's production starts
	// (after the previous epoch's last batch was packed, before the
	// epoch's first unit is decoded), on the producing goroutine: a
	// benchmark's exact epoch boundary, with nothing polling for it.
	EpochStart func(epoch uint64)
	// ArenaClaim, if not nil, is called with the id of the unit arena
	// (ring.arena) before its file is created: a daemon records it, so that
	// it can remove the arena even if it dies before Ready. An error
	// leaves the run without an arena.
	ArenaClaim func(id uint64) error
	// BenchSkipCopy is for one measurement only, lastmile bench's ceiling
	// of decoding into slots (bench/copies.go): packing skips copying the
	// values of rows that go to a batch in order, so those tensors hold
	// whatever their slot held before. Shapes, offsets, validity and
	// gathered rows are written as always. Never set it for a trainer.
	BenchSkipCopy bool
	// Hosts, when Count is 2 or more, makes this run serve one host's
	// share of a world that runs on several (hosts.go): the ranks
	// Index×L to Index×L+L-1 of the job's world_size, L = world/Count.
	// Rings, Ready, Resume and PlaceRing then count this host's ranks
	// only, from 0.
	Hosts Hosts
	// UnitRows, with Hosts, are the rows each unit of the plan yields as an
	// earlier run of the job counted them (Counted), and UnitRowsPlan that
	// run's plan as Counted gave it (a digest of its units, their files'
	// sizes and modification times): where this run plans the same, it
	// deals the units without counting them again.
	UnitRows     []int64
	UnitRowsPlan string
	// Counted, if not nil, is called with the plan's digest and every
	// unit's rows once a run with Hosts has counted them, before its first
	// batch: a daemon keeps them for the job's later runs (UnitRows).
	Counted func(plan string, rows []int64)
	// ShareCounts, if not nil, lets a run with Hosts count only its share
	// of the units (hostcounts.go): it is called with that share before the
	// first epoch and returns every unit's rows as the hosts counted them,
	// blocking until they are all known or ctx ends. nil: the run counts
	// every unit itself. Not called where UnitRows serve or the plan gives
	// the rows.
	ShareCounts func(ctx context.Context, share CountShare) ([]int64, error)
	// Dealt says that UnitRows are the counts an earlier run of this job
	// dealt its units by, as every other host of its world did (not a
	// like job's): a plan that differs from UnitRowsPlan then cannot be
	// dealt anew (the other hosts keep the old deal, and its trainers do not
	// exchange counts again). The run counts every unit here and goes on
	// only where they are the same counts (a file touched, not changed).
	Dealt bool
	// OnDealt, if not nil, is called once a run with Hosts has dealt its
	// units, before its first batch and before its steps per epoch are
	// known (Progress.BatchesPerEpoch), which a daemon shows its trainers
	// as their counts complete: it keeps the deal first.
	OnDealt func()
}

// Stats sums up a run.
type Stats struct {
	Units    int           // work units decoded
	Rows     int64         // rows packed into batches (padding included)
	Batches  int64         // batches published, all ranks together
	Bytes    int64         // payload bytes packed
	Epochs   int           // epochs completed
	Elapsed  time.Duration // wall time of the run
	Decode   time.Duration // time workers spent decoding, summed
	Pack     time.Duration // time spent packing batches into slots, waits on full rings excluded
	FullWait time.Duration // time the producer waited on full rings (the trainers were slower)
	Drain    time.Duration // time Linger waited, after the last batch, for consumers to release every batch
	Workers  int           // decode goroutines that ran: decode.workers, at most one per work unit
	// FilesPruned is the input files left out, never planned, because
	// the job's filters exclude them by their Iceberg manifest entries
	// or their partition directories.
	FilesPruned int
	// UnitsPruned is the units not read because their row groups'
	// statistics let no row pass the job's filters (prune.go).
	UnitsPruned int
	// RowsRuledOut is the rows of the units read that the filters' page
	// indexes ruled out, undecoded (pagefilter.go).
	RowsRuledOut int64
	// RowsDeleted is the rows of the planned units that the input
	// tables' deletes remove (Iceberg position and equality deletes,
	// deletion vectors: deletes.go), in each epoch.
	RowsDeleted int64
	Rings       []string
	// ArenaUnits is the units decoded into the unit arena (ring.arena),
	// ArenaFallbacks those decoded to the heap for want of a free chunk.
	ArenaUnits, ArenaFallbacks int
	// Pages counts the data pages the local decoders decoded, and those a
	// selection skipped (unread where the page index located them).
	Pages decode.Stats
}

// Busy is the run's wall time less its waits on trainers (full rings and
// the final drain): the time production had work to do, over which its
// rates are meaningful.
func (s Stats) Busy() time.Duration {
	return max(s.Elapsed-s.FullWait-s.Drain, 0)
}

// Run runs job until its epochs are done or ctx is canceled. On failure
// every ring is marked failed with the error's message, so that trainers
// see why the stream stopped; batches already published stay readable.
func Run(ctx context.Context, job *spec.Job, opts Options) (st Stats, err error) {
	// A ring or unit arena shrunk under us (its owner may truncate it:
	// shm/fault.go) fails this job with an error, not the process with a
	// fatal fault: here, where slots are packed, and in the decode
	// workers, whose panics come back as their units' errors.
	defer func() {
		if f, ok := shm.AsFault(err); ok && !errors.As(err, new(*shm.FaultError)) {
			err = fmt.Errorf("job %q: %w", job.Name, f)
		}
	}()
	defer shm.RecoverFault(debug.SetPanicOnFault(true), &err, "")
	return run(ctx, job, opts)
}

// runWorkerCount returns the run's local workers (decode.workers, else
// the CPUs this process may use) and the units spill may hold on peers.
func runWorkerCount(job *spec.Job, spill Spill) (workers, slots int) {
	workers = job.Decode.Workers
	if workers == 0 {
		workers = cpus.Available()
	}
	if spill != nil {
		slots = spill.Slots()
	}
	return workers, slots
}

// checkRunnable refuses a run that could not end or would resume at
// another place than its cursors say.
func checkRunnable(job *spec.Job, proc *processor, resume []Cursor, local, base int) error {
	if n := len(proc.plan.Units); job.EpochCount() == 0 && (n == 0 || proc.skipped == n) {
		// Epochs without end over nothing would spin a core for ever.
		return fmt.Errorf("job %q: nothing to read (its inputs hold no rows, or its filters ruled out every row group), and epochs: 0 repeats that for ever: check its inputs, or give epochs", job.Name)
	}
	if len(resume) > local {
		return fmt.Errorf("job %q: %d resume cursors for %d ranks", job.Name, len(resume), local)
	}
	// A cursor is the trainer's word: one whose rows before it (batch x
	// world_size x batch.size) overflow would resume at another place.
	for r, c := range resume {
		if c.Batch > uint64(math.MaxInt64)/uint64(max(job.WorldSize, 1))/uint64(max(job.Batch.Size, 1)) {
			return fmt.Errorf("job %q: rank %d's resume cursor (epoch %d, batch %d) is past any epoch's batches: resume from a checkpoint's cursor", job.Name, base+r, c.Epoch, c.Batch)
		}
	}
	return nil
}

// runProgress returns the run's Progress (prog, or a new one) watching
// its rings, arena and program.
func runProgress(prog *Progress, rings []*shm.Producer, ua *unitArena, proc *processor) *Progress {
	if prog == nil {
		prog = new(Progress)
	}
	prog.setRings(rings)
	if ua != nil {
		prog.setArena(ua)
	}
	prog.setProgram(proc.prog, proc.fetch)
	proc.progress = prog
	return prog
}

// runBatcher returns the batcher that deals the run's rows to its local
// ranks.
func runBatcher(job *spec.Job, opts Options, fields []packField, writers []slotWriter, prog *Progress,
	ua *unitArena, hs *hostSplit, proc *processor, local, base int) *batcher {
	bt := newBatcher(job.Batch.Size, local, job.Batch.Last, fields, writers, prog)
	bt.winSize, bt.seed, bt.resume, bt.rankBase = job.Shuffle.Buffer, job.Seed, opts.Resume, base
	bt.skipCopy = opts.BenchSkipCopy
	if ua != nil && ua.serving {
		bt.arena = ua
	}
	if hs != nil {
		// Each host's row shuffle draws from a seed of its own.
		bt.seed = splitmix64(job.Seed ^ streamHosts<<8 ^ uint64(hs.Index))
	}
	// The window points at cached unit outputs instead of copying them.
	bt.window.stable = proc.cache.owns
	return bt
}

func run(ctx context.Context, job *spec.Job, opts Options) (Stats, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	var st Stats
	workers, slots := runWorkerCount(job, opts.Spill)
	job, proc, err := planRun(ctx, job, opts.FS, workers+slots, log)
	if err != nil {
		return st, err
	}
	defer proc.close()
	hs, err := newHostSplit(opts.Hosts, job.WorldSize, proc, job.Seed, tablesOf(job))
	if err != nil {
		return st, fmt.Errorf("job %q: %w", job.Name, err)
	}
	local, base := job.WorldSize, 0
	if hs != nil {
		local, base = hs.local, hs.base
	}
	proc.cache = newUnitCache(int64(job.Cache.MaxMemory))
	proc.cache.watch(opts.Spill)
	plan, fields := proc.plan, packFields(proc.outFields(), proc.groups())
	if err := checkRunnable(job, proc, opts.Resume, local, base); err != nil {
		return st, err
	}
	if opts.Spill != nil {
		opts.Spill.Planned(plan)
		if so, ok := opts.Spill.(SpillOutputs); ok {
			so.Outputs(proc.outFields())
		}
	}
	// The pool runs at most one goroutine per unit; that is the count used.
	st.Workers = max(min(workers, len(plan.Units)), 1)
	notePlanned(&st, opts.Progress, proc, len(fields), slots, log)
	warnUnreadable(log, job, plan)

	ua, err := arenaFor(job, opts, plan, workers, local)
	if err != nil {
		// The rings may still fit, and rings adopted after a restart
		// need no new arena: the batches are copied instead.
		log.Warn("ring.arena: no unit arena; batches are copied into slots", "err", err)
	}
	// The arena goes with the run unless it was handed over (Ready: the
	// caller records it and removes it with the rings), whatever ends the
	// run, a panic included: nobody else knows it is there.
	handed := false
	defer func() { ua.close(opts.Remove || !handed) }()
	rings, err := createRings(job, plan, fields, local, base, opts.RingOwner, opts.PlaceRing, ua.shared())
	if err != nil {
		return st, err
	}
	for _, r := range rings {
		st.Rings = append(st.Rings, r.Name())
	}
	defer func() {
		if opts.Remove {
			for _, r := range rings {
				r.Remove()
			}
		}
	}()
	ua = settleArenas(job.Ring.Dir, rings, ua, log)
	writers := writersFor(ctx, rings, opts.Stage)
	prog := runProgress(opts.Progress, rings, ua, proc)
	defer watchSpill(ctx, opts.Spill, prog, workers)()
	if proc.exact && hs == nil {
		prog.setBatchesPerEpoch(batchesPerEpoch(plan.Rows, job.Batch.Size, job.WorldSize, job.Batch.Last))
	}
	if opts.Ready != nil {
		opts.Ready(st.Rings)
	}
	handed = true
	bt := runBatcher(job, opts, fields, writers, prog, ua, hs, proc, local, base)
	hooks := runHooks{gate: opts.Gate, epochStart: opts.EpochStart, hosts: hs,
		unitRows: opts.UnitRows, unitRowsPlan: opts.UnitRowsPlan, counted: opts.Counted, shareCounts: opts.ShareCounts,
		dealt: opts.Dealt, onDealt: opts.OnDealt}
	err = produce(ctx, job, proc, newRunWorkers(workers, opts.Spill, slots), bt, prog, hooks, &st)
	err = endRun(ctx, err, &st, prog, proc, rings, bt, opts.Linger, log)
	st.Elapsed = time.Since(start)
	if err != nil {
		return st, err
	}
	log.Info("done", "rows", st.Rows, "batches", st.Batches, "elapsed", st.Elapsed, "full_wait", st.FullWait, "drain", st.Drain)
	if w := noBatchWarning(job, st, opts.Resume); w != "" {
		log.Warn(w)
	}
	if bt.arena != nil {
		log.Info("unit arena", "units", st.ArenaUnits, "units_to_heap", st.ArenaFallbacks)
	}
	return st, nil
}

// endRun collects the run's figures into st and ends its rings: failed
// with err, or closed once drained (within linger).
func endRun(ctx context.Context, err error, st *Stats, prog *Progress, proc *processor, rings []*shm.Producer,
	bt *batcher, linger bool, log *slog.Logger) error {
	collectStats(st, prog, proc, rings)
	if bt.arena != nil {
		st.ArenaUnits, st.ArenaFallbacks = int(bt.arena.units.Load()), int(bt.arena.fallbacks.Load())
	}
	if err != nil {
		bt.abort()
		failRings(rings, err)
		return err
	}
	closeRings(ctx, rings, linger, st, log)
	return nil
}

// notePlanned records what planning pruned and deleted in st and in prog
// (if any: before the rings exist, which a status may wait for), and logs
// the plan. The caller's logger names the job (the daemon's carries job
// and job_id; lastmile run's carries job): it is not added here again.
func notePlanned(st *Stats, prog *Progress, proc *processor, outputs, slots int, log *slog.Logger) {
	st.FilesPruned, st.UnitsPruned, st.RowsDeleted = proc.pruned, proc.skipped, proc.deleted
	if prog != nil {
		prog.FilesPruned.Store(int64(proc.pruned))
		prog.UnitsPruned.Store(int64(proc.skipped))
		prog.RowsDeleted.Store(proc.deleted)
	}
	plan := proc.plan
	log.Info("planned", "files", len(plan.Files), "units", len(plan.Units), "rows", plan.Rows,
		"columns", len(plan.Fields), "outputs", outputs, "workers", st.Workers, "spill_slots", slots,
		"files_pruned", proc.pruned, "units_pruned", proc.skipped, "rows_deleted", proc.deleted)
}

// planRun pins one snapshot of every Iceberg input for all epochs of the
// run, then plans the job and compiles its pipeline for workers workers.
func planRun(ctx context.Context, job *spec.Job, fsys decode.FS, workers int, log *slog.Logger) (*spec.Job, *processor, error) {
	pinned, err := PinInputs(ctx, job, fsys)
	if err != nil {
		return nil, nil, fmt.Errorf("job %q: %w", job.Name, err)
	}
	for i, in := range pinned.Inputs {
		if in != job.Inputs[i] {
			log.Info("iceberg snapshot pinned", "input", job.Inputs[i], "as", in)
		}
	}
	proc, err := newProcessor(ctx, pinned, workers, fsys)
	if err != nil {
		return nil, nil, fmt.Errorf("job %q: %w", pinned.Name, err)
	}
	return pinned, proc, nil
}

// collectStats fills st with a finished (or failed) run's counts.
func collectStats(st *Stats, prog *Progress, proc *processor, rings []*shm.Producer) {
	st.Rows, st.Batches, st.Bytes = prog.Rows.Load(), prog.Batches.Load(), prog.Bytes.Load()
	st.Decode = time.Duration(prog.DecodeNanos.Load())
	st.RowsRuledOut = proc.ruledOut.Load()
	for _, w := range proc.workers {
		st.Pages.Add(w.dec.Stats())
	}
	// The sleeps on full rings are the trainers' time, counted apart in
	// FullWait; the batcher's pack time leaves them out.
	for _, r := range rings {
		st.FullWait += r.Stats().FullWait
	}
	st.Pack = time.Duration(prog.PackNanos.Load())
}

// runHooks are the callers' functions that produce calls (Options.Gate
// and Options.EpochStart).
type runHooks struct {
	gate       func(context.Context) (func(), error)
	epochStart func(epoch uint64)
	hosts      *hostSplit // nil: one host
	// unitRows and unitRowsPlan, counted (Options.UnitRows and Counted).
	unitRows     []int64
	unitRowsPlan string
	counted      func(plan string, rows []int64)
	dealt        bool   // Options.Dealt
	onDealt      func() // Options.OnDealt
	shareCounts  func(ctx context.Context, share CountShare) ([]int64, error)
}

// produce runs the epochs.
func produce(ctx context.Context, job *spec.Job, proc *processor, rw runWorkers, bt *batcher, prog *Progress,
	hooks runHooks, st *Stats) error {
	plan := proc.plan
	// The earliest cursor of any rank is where production starts.
	start := Cursor{}
	for i, c := range bt.resume {
		if i == 0 || c.Less(start) {
			start = c
		}
	}
	cfg := pool.Config{Workers: rw.local + rw.slots, InFlight: job.Decode.InFlight}
	if cfg.InFlight > 0 {
		cfg.InFlight += 2 * rw.slots
	}
	fields := proc.outFields()
	if err := hooks.hosts.prepare(ctx, proc, cfg, bt, prog, hooks); err != nil {
		return err
	}
	// Decoded-unit buffers outlive each epoch's pool.Run, so later epochs
	// reuse memory that is already grown and touched.
	var spare batchPool
	epochs := job.EpochCount()
	for e := start.Epoch; epochs == 0 || e < uint64(epochs); e++ {
		// An epoch of no units (inputs without rows) checks nothing
		// itself: without this, epochs without end spin for ever.
		if err := ctx.Err(); err != nil {
			return err
		}
		step := uint64(0)
		if e == start.Epoch {
			step = start.Batch
		}
		bt.startEpoch(e, step)
		// The last epoch's units are not cached: nothing would read them.
		proc.fill.Store(proc.cache != nil && (epochs == 0 || e+1 < uint64(epochs)))
		prog.Epoch.Store(int64(e))
		if hooks.epochStart != nil {
			hooks.epochStart(e)
		}
		order := hooks.hosts.units(unitOrder(len(plan.Units), job.Shuffle.Units, job.Seed, e))
		// Units whose rows all come before the first row needed are not
		// decoded at all when the plan gives their row counts, and only
		// for their Early columns when Select does. (With a pad source to
		// collect, the first units are needed whole.)
		first := 0
		if job.Batch.Last != "pad" && bt.skipIn > 0 {
			var err error
			if first, err = skipUnits(ctx, proc, order, cfg, bt); err != nil {
				return fmt.Errorf("epoch %d: resume: %w", e, err)
			}
		}
		ur := &unitRun{rw: rw, proc: proc, prog: prog, gate: hooks.gate, fields: fields, spare: &spare, units: order[first:], arena: bt.arena, hosts: hooks.hosts}
		emit := func(i int, b *column.Batch) error {
			if !proc.cache.owns(b) {
				spare.seen(b) // a cached unit's output is never a spare
			}
			if err := hooks.hosts.check(proc, ur.units[i], b.Rows); err != nil {
				return err
			}
			if err := bt.add(ctx, b); err != nil {
				return err
			}
			bt.arena.retire(b) // its batches are packed and named
			return nil
		}
		err := pool.Run(ctx, cfg, len(ur.units), ur.work, emit)
		spare.reclaim()
		if err != nil {
			var ue *pool.UnitError
			if errors.As(err, &ue) && ue.Op == "work" {
				return fmt.Errorf("epoch %d: %w", e, ue.Err)
			}
			return fmt.Errorf("epoch %d: %w", e, err)
		}
		if err := bt.endEpoch(ctx); err != nil {
			return fmt.Errorf("epoch %d: %w", e, err)
		}
		if epochs == 0 && bt.step == 0 {
			// (A resumed epoch counts the steps before its cursor.)
			return fmt.Errorf("epoch %d: nothing to read: %s, and epochs: 0 repeats that for ever: %s, or give epochs", e, noBatchWhy(job), noBatchFix)
		}
		st.Units += len(ur.units)
		st.Epochs++
	}
	return nil
}

// noBatchWhy says why a job's epoch can give no batch; noBatchFix what
// to change.
func noBatchWhy(job *spec.Job) string {
	step := int64(job.Batch.Size) * int64(max(job.WorldSize, 1))
	return fmt.Sprintf("no row reached a batch, or fewer than one step of batch.size x world_size = %d rows did (batch.last: %s)", step, job.Batch.Last)
}

const noBatchFix = "check the job's inputs and filters, or lower batch.size (batch.last: pad fills a short last step)"

// noBatchWarning is what a finished run that gave no batch at all says
// (it is not an error: a finite job over an empty input ends), or "". A
// resumed run may have nothing left to give (a cursor at its last
// epoch's end): it says nothing.
func noBatchWarning(job *spec.Job, st Stats, resume []Cursor) string {
	if st.Batches > 0 || st.Epochs == 0 || slices.ContainsFunc(resume, func(c Cursor) bool { return c != Cursor{} }) {
		return ""
	}
	return fmt.Sprintf("job %q gave no batch: %s; its trainers get nothing to train on: %s", job.Name, noBatchWhy(job), noBatchFix)
}

// batchesPerEpoch is how many batches each rank gets from an epoch of rows
// rows (see batcher): full steps of world batches; last: pad completes the
// last step, last: keep (one rank) adds the short batch.
func batchesPerEpoch(rows int64, size, world int, last string) int64 {
	step := int64(size) * int64(world)
	if step <= 0 || rows <= 0 {
		return 0
	}
	n := rows / step
	if last != "drop" && rows%step != 0 {
		n++
	}
	return n
}

// errEnough stops a counting pass.
var errEnough = errors.New("enough units counted")

// skipUnits returns how many units of order lie wholly before the first
// row bt needs, taking their rows off bt.skipIn.
func skipUnits(ctx context.Context, proc *processor, order []int32, cfg pool.Config, bt *batcher) (int, error) {
	units := proc.plan.Units
	first := 0
	if proc.exact {
		for first < len(order) && bt.skipIn >= units[order[first]].Rows {
			bt.skipIn -= units[order[first]].Rows
			first++
		}
		return first, nil
	}
	if !proc.counted {
		return 0, nil // every unit runs whole; the batcher drops the rows
	}
	count := func(ctx context.Context, worker, i int, _ int64) (int64, error) {
		return proc.count(ctx, worker, units[order[i]])
	}
	emit := func(i int, n int64) error {
		if bt.skipIn < n {
			return errEnough
		}
		bt.skipIn -= n
		first++
		return nil
	}
	err := pool.Run(ctx, cfg, len(order), count, emit)
	if err != nil && !errors.Is(err, errEnough) {
		return 0, err
	}
	return first, nil
}
