package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/spec"
)

// Spilling units to CPU peers
//
// A run with a Spill has, besides its local workers, Spill.Slots() spill
// workers in the same pool. Units are claimed in plan order from the one
// counter whichever worker takes them, so the reorder stage and everything
// after it are the same as in a local run. A spill worker asks the Spill to
// run its unit on a peer; the Spill may decline (spill is off, no peer has
// credit, the unit's file is outside every data root), and then the worker
// computes the unit locally, in one of the local workers' places
// (runWorkers.here: at most as many units compute here as there are local
// workers) and through the CPU gate, like any local worker. A unit slow
// to come back from its peer may be hedged here (hedge.go).
//
// Invariants:
//   - A unit is done only when its output is in this process, complete and
//     checked: Spill.RunUnit returns only then, and the pool emits it into
//     the reorder stage in plan order. A peer that dies, hangs or sends a
//     corrupt stream costs time, never a row: the worker runs the unit
//     locally (or the Spill on another peer) and the first complete result
//     is the only one used.
//   - A peer runs the same code on the same unit (UnitProcessor), so its
//     output is byte-identical to a local run's; the engine checks the
//     schema of what comes back and that its row count is possible.
//   - Spill workers do not hold a CPU token while a peer works: the CPU
//     they save is the point.
//
// Rejected: a separate queue of units for peers, refilled by the engine
// (it must then be merged back into plan order, and a unit sent but not
// yet back would need its own bookkeeping across restarts); and spilling
// whole files (too coarse to balance, and a lost peer loses a file's
// worth of work).

// Spill runs units on CPU peers. Package peer implements it.
type Spill interface {
	// Slots is the most units this run may have on peers at once: the
	// number of spill workers.
	Slots() int
	// Planned is called once per run, before any RunUnit, with the
	// run's plan: the columns its units decode by, as planning every
	// input file gave them, which a peer must decode them by too.
	Planned(plan *decode.Plan)
	// RunUnit runs u on a peer and fills out with its output rows, the
	// same as a local run would compute. ran is false when no peer ran it
	// (declined, or every try failed): the caller then runs it locally.
	// load describes the local side at the time of the call.
	RunUnit(ctx context.Context, u decode.Unit, out *column.Batch, load Load) (ran bool, err error)
	// Watch is called once per run, on a goroutine of its own, with a
	// function that samples the local side; it returns once ctx is done.
	// A Spill decides when to spill from samples taken at its own pace:
	// the moments units are claimed are right after an emission, when the
	// rings are at their fullest, and would bias the decision.
	Watch(ctx context.Context, load func() Load)
}

// SpillOutputs is implemented by a Spill that checks a peer's output
// against the run's columns as it arrives, before it holds a row of it:
// Outputs is called once per run, after Planned, with the columns every
// unit's output must have (what checkOutput checks once it is whole).
type SpillOutputs interface {
	Outputs(fields []OutField)
}

// Load is what the engine tells a Spill about the local side, for the
// decision to spill.
type Load struct {
	LocalWorkers int // workers computing units locally, busy or not
	// LocalBusy is how many units are claimed for local work now: being
	// computed, or waiting for a CPU (the daemon shares CPUs between jobs
	// by tokens). LocalBusy >= LocalWorkers means no local capacity is
	// left unused.
	LocalBusy int
	RingFill  float64 // mean occupancy of the job's rings, 0 (empty: trainers starve) to 1 (full)
	// SecondsPerRow is the mean wall time a local worker has spent per
	// input row of the units it computed (0 until one is done): about the
	// CPU a unit costs locally, since a worker holds a CPU while it works.
	SecondsPerRow float64
	// Stall is the share of the last few seconds the most starved
	// trainer waited on an empty ring (Progress.SetStall; 0 when nobody
	// measures it): what the trainers feel, where RingFill is what the
	// producer sees.
	Stall float64
	// UnitsLeft is how many units of the epoch are not yet claimed, the
	// one offered not counted: near the end of an epoch the local workers
	// are about to run out of work, and a unit queued behind others at a
	// peer may finish later than it would here.
	UnitsLeft int
}

// load snapshots the local side for the Spill's decision.
func (p *Progress) load(local int) Load {
	l := Load{LocalWorkers: local, LocalBusy: int(p.localClaimed.Load()), Stall: p.Stall()}
	if rows := p.LocalRows.Load(); rows > 0 {
		l.SecondsPerRow = float64(p.DecodeNanos.Load()) / 1e9 / float64(rows)
	}
	stats := p.RingStats()
	for _, s := range stats {
		if s.Slots > 0 {
			l.RingFill += float64(s.Occupancy()) / float64(s.Slots)
		}
	}
	if len(stats) > 0 {
		l.RingFill /= float64(len(stats))
	}
	return l
}

// checkOutput verifies that a peer's output fits the run's schema.
func checkOutput(b *column.Batch, fields []OutField, u decode.Unit) error {
	if len(b.Columns) != len(fields) {
		return fmt.Errorf("peer output has %d columns, want %d", len(b.Columns), len(fields))
	}
	if b.Rows < 0 || int64(b.Rows) > u.Rows {
		return fmt.Errorf("peer output has %d rows from a unit of %d", b.Rows, u.Rows)
	}
	for i, f := range fields {
		c := &b.Columns[i]
		if c.Name != f.Name || c.Kind != f.Kind || c.DType != f.DType || c.Len != b.Rows ||
			(f.Kind == column.Fixed && c.Width != f.Width) {
			return fmt.Errorf("peer output column %d is %s %v %v width %d len %d, want %s %v %v width %d len %d",
				i, c.Name, c.Kind, c.DType, c.Width, c.Len, f.Name, f.Kind, f.DType, f.Width, b.Rows)
		}
	}
	return nil
}

// UnitProcessor computes units of a job the way a local run does: the
// peer side of spilling. It is safe for concurrent use; each call takes
// one of its workers.
type UnitProcessor struct {
	proc   *processor
	free   chan int
	fields []OutField
	once   sync.Once
}

// NewUnitProcessor plans job's inputs through fsys (a peer passes its data
// roots), compiles its pipeline, and returns a processor with workers
// workers. A job whose inputs are a single file of the job's is enough:
// the schema is what matters, and every file of a job agrees on it. The
// units it computes come from another host's plan, so its decoders check
// each against its file's footer (decode.VerifyUnits): a unit that does
// not match fails with decode.ErrBadUnit.
func NewUnitProcessor(ctx context.Context, job *spec.Job, fsys decode.FS, workers int) (*UnitProcessor, error) {
	workers = max(workers, 1)
	proc, err := newProcessor(ctx, job, workers, fsys)
	if err != nil {
		return nil, err
	}
	return unitProcessor(proc, workers), nil
}

// NewFileProcessor is NewUnitProcessor for a job whose inputs are files
// a plan found (a unit's file, as a peer is sent it): each is planned by
// its name (decode.PlanOptions.Listed), not expanded as a user's input
// is. A file "part[0].parquet" is that file, not the glob
// "part0.parquet", and an object without the ".parquet" suffix is not
// listed as the prefix it might be.
func NewFileProcessor(ctx context.Context, job *spec.Job, fsys decode.FS, workers int) (*UnitProcessor, error) {
	workers = max(workers, 1)
	in, err := inputFiles(ctx, job, fsys)
	if err != nil {
		return nil, err
	}
	in.listed = true
	proc, err := inputProcessor(ctx, job, in, workers, fsys)
	if err != nil {
		return nil, err
	}
	return unitProcessor(proc, workers), nil
}

// NewUnitProcessorOf is NewUnitProcessor for the columns the requester
// planned (decode.PlanOf): a unit of an Iceberg table is decoded by what
// planning all of the table's files gave, a column renamed, added or
// promoted since one of them was written included. No file is planned.
func NewUnitProcessorOf(ctx context.Context, job *spec.Job, fields, partitions []decode.Field, fsys decode.FS, workers int) (*UnitProcessor, error) {
	plan, err := decode.PlanOf(fields, partitions, fsys)
	if err != nil {
		return nil, fmt.Errorf("the requester's plan: %w", err)
	}
	workers = max(workers, 1)
	proc, err := processorOf(ctx, job, plan, workers, fsys)
	if err != nil {
		return nil, err
	}
	return unitProcessor(proc, workers), nil
}

// unitProcessor wraps proc, whose decoders it makes check every unit
// against its file's footer.
func unitProcessor(proc *processor, workers int) *UnitProcessor {
	for _, w := range proc.workers {
		w.dec.VerifyUnits()
	}
	up := &UnitProcessor{proc: proc, free: make(chan int, workers), fields: proc.outFields()}
	for i := range workers {
		up.free <- i
	}
	return up
}

// Units are the job's work units as the engine plans them: what a spill
// worker sends a peer.
func (up *UnitProcessor) Units() []decode.Unit { return up.proc.plan.Units }

// Fields is the schema of the processor's output.
func (up *UnitProcessor) Fields() []OutField { return up.fields }

// SideMemory is the memory the job's join side tables hold now, for as
// long as the processor lives (ops.Program.SideMemory: a bucket join's
// changes as its buckets load and are evicted): a peer counts it against
// its max_memory while it keeps the compiled job.
func (up *UnitProcessor) SideMemory() int64 {
	if up.proc.prog == nil {
		return 0
	}
	return up.proc.prog.SideMemory()
}

// Compute fills out with unit u's output rows. u's file is opened through
// the processor's FS. A unit whose partition values its file's path does
// not give is refused (decode.ErrBadUnit), as one whose chunks its
// file's footer does not.
func (up *UnitProcessor) Compute(ctx context.Context, u decode.Unit, out *column.Batch) error {
	var w int
	select {
	case w = <-up.free:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { up.free <- w }()
	if err := up.proc.plan.CheckPartition(&u); err != nil {
		return fmt.Errorf("%s row group %d: %w", u.File, u.RowGroup, err)
	}
	if err := up.proc.compute(ctx, w, u, out); err != nil {
		return err
	}
	if out.Rows == 0 {
		shapeEmpty(out, up.fields)
	}
	return nil
}

// shapeEmpty makes out an empty batch of fields' columns. A unit whose
// pipeline keeps no row leaves its batch's columns as they were: a
// peer's reused batch may hold another job's, or none, and the requester
// refused the unit (checkOutput) and computed it again for nothing.
func shapeEmpty(out *column.Batch, fields []OutField) {
	out.Rows = 0
	if cap(out.Columns) < len(fields) {
		out.Columns = make([]column.Column, len(fields))
	}
	out.Columns = out.Columns[:len(fields)]
	for i, f := range fields {
		c := &out.Columns[i]
		c.Name, c.Kind, c.DType, c.Width, c.Len = f.Name, f.Kind, f.DType, f.Width, 0
		c.Data, c.Valid, c.Offsets = c.Data[:0], nil, nil
		if f.Kind != column.Fixed {
			c.Offsets = []int64{0}
		}
	}
}

// Close releases the processor's decoders.
func (up *UnitProcessor) Close() { up.once.Do(up.proc.close) }

// watchSpill starts spill's Watch (if spill is not nil) with samples of
// prog's local side, and returns the function that stops it and waits.
func watchSpill(ctx context.Context, spill Spill, prog *Progress, local int) (stop func()) {
	if spill == nil {
		return func() {}
	}
	wctx, cancel := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		spill.Watch(wctx, func() Load { return prog.load(local) })
	}()
	return func() { cancel(); <-watched }
}

// runWorkers sizes a run's pool: local workers first, then spill workers.
type runWorkers struct {
	local int
	spill Spill
	slots int
	// here holds a token for each unit computing here, at most local at
	// once, when the run has spill workers: those that compute a unit
	// here (declined, failed, or hedging) take a local worker's place
	// rather than crowd its CPUs. nil without spill workers.
	here chan struct{}
}

func newRunWorkers(local int, spill Spill, slots int) runWorkers {
	rw := runWorkers{local: local, spill: spill, slots: slots}
	if slots > 0 {
		rw.here = make(chan struct{}, local)
	}
	return rw
}

// spillUnit is a spill worker's attempt at the epoch's i-th unit (one
// the cache does not hold) on a peer, hedged here when the peer is slow
// (hedge.go). done is false when the worker must compute the unit here,
// into the batch returned.
// check is not nil when out is a peer's output that must be verified
// here before it is used (verify.go).
func (ur *unitRun) spillUnit(ctx context.Context, worker, i int, buf *column.Batch) (out *column.Batch, done bool, check mismatchFunc, err error) {
	u := ur.proc.plan.Units[ur.units[i]]
	load := ur.prog.load(ur.rw.local)
	load.UnitsLeft = len(ur.units) - i - 1
	if after := ur.rw.hedgeAfter(); after > 0 {
		return ur.hedged(ctx, worker, i, buf, load, after)
	}
	check, ok, err := ur.onPeer(ctx, ur.units[i], u, buf, load)
	if !ok || err != nil {
		return buf, false, nil, err
	}
	ur.acceptSpilled(u, buf, check)
	return buf, true, check, nil
}

// onPeer runs u on a peer into buf and checks its output against the
// run's schema. ok is false when no peer ran it, or what came back does
// not fit: the unit must then be computed here. err is ctx's error once
// ctx is done, and nil otherwise. check is the Spill's Verifier's
// answer for the unit (nil: not verified).
func (ur *unitRun) onPeer(ctx context.Context, idx int32, u decode.Unit, buf *column.Batch, load Load) (check mismatchFunc, ok bool, err error) {
	ran, err := ur.rw.spill.RunUnit(ctx, u, buf, load)
	if err == nil && ran {
		check = ur.rw.verifyRan(u, buf)
		err = checkOutput(buf, ur.fields, u)
	}
	if err == nil && ran {
		// Where the hosts counted the unit's rows, a peer's output of
		// another count is wrong: computed here instead, rather than
		// failing the run as a changed file would.
		err = ur.hosts.check(ur.proc, idx, buf.Rows)
	}
	switch {
	case ctx.Err() != nil:
		return nil, false, ctx.Err()
	case err != nil || !ran:
		return nil, false, nil
	}
	return check, true, nil
}

// acceptSpilled counts a peer's output of u as the unit's (unitRun.work
// caches it when the cache is filling). A unit to be verified (check) is
// counted once verified, by the output used (unitRun.verify).
func (ur *unitRun) acceptSpilled(u decode.Unit, buf *column.Batch, check mismatchFunc) {
	if check != nil {
		return
	}
	ur.prog.UnitsDone.Add(1)
	ur.prog.UnitsSpilled.Add(1)
}
