package engine

import (
	"context"
	"runtime"
	"time"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
)

// unitRun is what an epoch's workers share: the units in the epoch's
// order, and where each goes (a peer, the unit cache, or here).
type unitRun struct {
	rw     runWorkers
	proc   *processor
	prog   *Progress
	gate   func(context.Context) (func(), error)
	fields []OutField
	spare  *batchPool
	units  []int32
	arena  *unitArena // nil: none (arena.go)
	hosts  *hostSplit // nil: one host; else every unit's rows as counted
}

// work computes the epoch's i-th unit into buf (a spare batch when nil):
// a spill worker's on a peer or from the cache when it can, any other
// unit here.
func (ur *unitRun) work(ctx context.Context, worker, i int, buf *column.Batch) (*column.Batch, error) {
	if ur.proc.cache.owns(buf) {
		// An earlier unit's output taken from the cache by reference:
		// it is read-only, so this unit needs a buffer of its own.
		buf = nil
	}
	if buf == nil {
		buf = ur.spare.get()
	}
	if ur.arena != nil {
		// The unit is decoded into an arena chunk if one is free
		// (arena.go); with a unit arena there is no cache nor peer. The
		// decoder takes from the chunk for this unit only.
		dec := ur.proc.workers[worker].dec
		dec.SetAlloc(ur.arena.prepare(buf))
		defer dec.SetAlloc(nil)
	}
	if ur.proc.skips(int(ur.units[i])) {
		// Pruned by its statistics: no rows, nothing read, here or on
		// a peer (prune.go).
		emptyBatch(buf)
		return buf, nil
	}
	u := ur.proc.plan.Units[ur.units[i]]
	if cached := ur.proc.cache.view(u.Seq); cached != nil {
		// Cached in an earlier epoch: emitted as it is stored, with no
		// copy (cache.go); buf waits for a unit that needs one.
		ur.spare.put(buf)
		ur.countLocal(u, 0)
		return cached, nil
	}
	out, believed, err := ur.compute(ctx, worker, i, buf)
	if err == nil && ur.proc.fill.Load() && ur.proc.cache.keep(u.Seq, out, believed) {
		// The cache owns out from now on: it is emitted as it is, and
		// never refilled (cache.go). Only a unit's final output gets
		// here, so a hedge's losing run is never cached.
		ur.spare.forget(out)
	}
	return out, err
}

// compute runs the epoch's i-th unit, which the cache does not hold, into
// buf: on a peer for a spill worker when it can, here otherwise. It
// returns the batch that holds the unit's output, and whether that is a
// peer's output nobody verified (believed: the unit cache stops serving
// those once a peer is caught).
func (ur *unitRun) compute(ctx context.Context, worker, i int, buf *column.Batch) (out *column.Batch, believed bool, err error) {
	if worker >= ur.rw.local {
		out, done, check, err := ur.spillUnit(ctx, worker, i, buf)
		if done && err == nil && check != nil {
			out, err = ur.verify(ctx, worker, i, out, check)
			return out, false, err
		}
		if done || err != nil {
			// buf holds the peer's output; a hedge's local run is in
			// another batch.
			return out, done && err == nil && out == buf, err
		}
		buf = out // declined or failed: computed here, like any local unit
	}
	release, err := ur.claimHere(ctx)
	if err != nil {
		return buf, false, err
	}
	defer release()
	took, err := ur.computeHere(ctx, worker, i, buf)
	if err == nil {
		ur.countLocal(ur.proc.plan.Units[ur.units[i]], took)
	}
	return buf, false, err
}

// claimHere claims a local worker's place for a unit about to be
// computed here, waiting for one where hedges share them (hedge.go), and
// returns the function that gives it back.
func (ur *unitRun) claimHere(ctx context.Context) (release func(), err error) {
	// Claimed for local work: waiting for a place, a CPU, or computing.
	ur.prog.localClaimed.Add(1)
	if ur.rw.here == nil {
		return func() { ur.prog.localClaimed.Add(-1) }, nil
	}
	select {
	case ur.rw.here <- struct{}{}:
		return func() { <-ur.rw.here; ur.prog.localClaimed.Add(-1) }, nil
	case <-ctx.Done():
		ur.prog.localClaimed.Add(-1)
		return nil, ctx.Err()
	}
}

// computeHere computes the epoch's i-th unit into buf on this host's
// CPUs, the caller having claimed it (localClaimed), and returns how long
// the computing took, waits for a CPU aside.
func (ur *unitRun) computeHere(ctx context.Context, worker, i int, buf *column.Batch) (time.Duration, error) {
	rw, proc, prog, units, plan := ur.rw, ur.proc, ur.prog, ur.units, ur.proc.plan
	if ur.gate != nil {
		release, err := ur.gate(ctx)
		if err != nil {
			return 0, err
		}
		defer release()
	}
	prog.UnitsInFlight.Add(1)
	defer prog.UnitsInFlight.Add(-1)
	// Remote inputs: start fetching the unit handed out one round
	// of workers from now, so its bytes arrive while this one
	// decodes (within the source's memory bound; nothing locally).
	if next := i + rw.local; next < len(units) && !proc.skips(int(units[next])) {
		decode.PrefetchUnit(plan.FS(), &plan.Units[units[next]], ur.proc.fetch.skipFields())
	}
	if rw.slots > 0 {
		// Let the spill workers' sends go out before this unit's
		// compute holds the CPU: on a requester of one CPU, gRPC's
		// writer otherwise waits for the scheduler's preemption
		// (docs/peers.md, "Two cores are not twice one core").
		runtime.Gosched()
	}
	t := time.Now()
	err := proc.run(ctx, worker, plan.Units[units[i]], buf)
	return time.Since(t), err
}

// countLocal counts unit u as computed here in took: its time and rows
// feed the spill decision's cost of a row here (Load.SecondsPerRow).
func (ur *unitRun) countLocal(u decode.Unit, took time.Duration) {
	ur.prog.DecodeNanos.Add(int64(took))
	ur.prog.LocalRows.Add(u.Rows)
	ur.prog.UnitsDone.Add(1)
}
