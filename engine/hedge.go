package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
)

// Hedging a slow peer's unit
//
// A spilled unit holds up every unit after it: the reorder stage emits in
// plan order, so a peer that answers late (overloaded, a slow link, a
// long garbage collection) starves the rings even while the local workers
// have nothing to do, until the unit's deadline (Spill's own, seconds)
// gives up on the peer. A Spill that implements Hedger bounds that wait:
// once a unit has waited HedgeAfter on its peer and a local worker is
// idle, the spill worker starts the same unit here as well. The first
// complete result is the unit's; the other is canceled and discarded
// whole.
//
// Invariants:
//   - A unit has one output. The peer's answer is written into the
//     worker's buffer, the local run into a spare one; the loser's
//     buffer goes back to the spare pool only once its writer has
//     returned, and only the winner is cached and counted.
//   - Both results are byte-identical (the same code on the same unit),
//     so which one wins changes timing, never batches.
//   - A hedge takes an idle local worker's place (runWorkers.here, a
//     token for each of the local workers, which every unit computed here
//     holds) and then the CPU gate like any local unit: it never computes
//     beside a full set of local workers, where it would only slow them;
//     a local worker that wants its place back waits for the hedge.
//   - A canceled peer run is abandoned, not failed: the Spill returns
//     its credit without excluding the peer for it. The cancellation's
//     cause is ErrHedged when the hedge won, so that a Spill can exclude
//     a peer whose units are all won here (a link that answers nothing).
//
// Steps: the spill worker runs the unit on its peer while a timer fires
// every HedgeAfter until it answers; each time, the timer's goroutine
// tries to claim an idle local worker's place, and once it has one it
// computes the unit here on the spill worker's own decoder (the peer run
// needs none), canceling the peer's run if it finishes first. When the
// peer's run returns, the worker stops the timer and, if the hedge had
// started, takes whichever result came first. A unit that is never
// hedged costs a timer: no goroutine, no channel.
//
// Rejected: hedging whenever a peer is slow, local workers busy or not
// (the hedge then takes CPU from units that are not late, and a slow
// peer under load would have every unit computed twice); and sending the
// unit to a second peer instead (the peers are what is slow or far; the
// second try on another peer is the Spill's, after its deadline).

// ErrHedged is the cause (context.Cause) of a peer run's context when a
// hedge here finished first: a Spill may hold it against a peer that is
// hedged this way again and again.
var ErrHedged = errors.New("the unit's hedge here finished first")

// Hedger is implemented by a Spill whose slow units may be hedged here.
type Hedger interface {
	// HedgeAfter is how long a unit may wait on its peer before it is
	// started here as well, when a local worker is idle; 0: never.
	HedgeAfter() time.Duration
}

// hedgeAfter is the run's Spill's HedgeAfter, or 0.
func (rw runWorkers) hedgeAfter() time.Duration {
	if h, ok := rw.spill.(Hedger); ok {
		return h.HedgeAfter()
	}
	return 0
}

// claimIdle takes an idle local worker's place for a hedge, if one is
// free now, and reports whether it did; release gives it back.
func (ur *unitRun) claimIdle() (release func(), ok bool) {
	if ur.rw.here == nil {
		return nil, false
	}
	select {
	case ur.rw.here <- struct{}{}:
		ur.prog.localClaimed.Add(1)
		return func() { <-ur.rw.here; ur.prog.localClaimed.Add(-1) }, true
	default:
		return nil, false
	}
}

type localResult struct {
	took time.Duration
	err  error
}

// hedged runs the epoch's i-th unit on a peer into buf, on this
// goroutine, and here as well, on a timer's, once it has waited after
// with a local worker idle. It returns the winner's batch; done is false
// when neither produced the unit (the peer declined or failed before a
// hedge started) and the worker must compute it here, into the batch
// returned. A unit that is not hedged costs a timer, nothing more.
func (ur *unitRun) hedged(ctx context.Context, worker, i int, buf *column.Batch, load Load,
	after time.Duration) (*column.Batch, bool, mismatchFunc, error) {
	u := ur.proc.plan.Units[ur.units[i]]
	pctx, cancelPeer := context.WithCancelCause(ctx)
	defer cancelPeer(nil)
	h := &hedge{ur: ur, ctx: ctx, worker: worker, i: i, after: after, cancelPeer: cancelPeer, local: make(chan localResult, 1)}
	h.mu.Lock()
	h.timer = time.AfterFunc(after, h.try)
	h.mu.Unlock()
	check, ok, err := ur.onPeer(pctx, ur.units[i], u, buf, load)
	if !h.stop() {
		if ok {
			ur.acceptSpilled(u, buf, check)
		}
		return buf, ok, check, err
	}
	defer h.release()
	switch {
	case ctx.Err() != nil: // the run is stopping
		h.cancelLocal()
		<-h.local
		ur.spare.put(h.mine)
		return buf, false, nil, ctx.Err()
	case ok:
		// The peer's answer came first: the local run is discarded (a
		// verification, if the unit is drawn for one, runs once the
		// hedge's place is given back).
		h.cancelLocal()
		<-h.local
		ur.spare.put(h.mine)
		ur.acceptSpilled(u, buf, check)
		return buf, true, check, nil
	}
	// The local run won (and canceled the peer's), or the peer gave up:
	// the local run is the unit's.
	l := <-h.local
	ur.spare.put(buf)
	out, done, err := ur.localWon(u, h.mine, l)
	return out, done, nil, err
}

// hedge is a unit's local run beside its peer's (hedged): started by a
// timer once a local worker's place is free, and stopped, if it has not
// started, when the peer's run returns.
type hedge struct {
	ur         *unitRun
	ctx        context.Context
	worker, i  int
	after      time.Duration
	cancelPeer context.CancelCauseFunc
	local      chan localResult // the local run's result, once started

	mu          sync.Mutex
	timer       *time.Timer
	stopped     bool
	started     bool
	release     func()             // gives back the local place, once started
	cancelLocal context.CancelFunc // once started
	mine        *column.Batch      // the local run's output, once started
}

// try starts the local run if a local worker's place is free, and
// otherwise tries again after h.after. It runs on the timer's goroutine,
// which computes the unit.
func (h *hedge) try() {
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return
	}
	release, ok := h.ur.claimIdle()
	if !ok {
		h.timer.Reset(h.after)
		h.mu.Unlock()
		return
	}
	lctx, cancel := context.WithCancel(h.ctx)
	h.started, h.release, h.cancelLocal, h.mine = true, release, cancel, h.ur.spare.get()
	h.mu.Unlock()
	h.ur.prog.UnitsHedged.Add(1)
	took, err := h.ur.computeHere(lctx, h.worker, h.i, h.mine)
	if err == nil {
		h.cancelPeer(ErrHedged) // first: the peer's run is given up
	}
	h.local <- localResult{took, err}
}

// stop stops the timer and reports whether the local run had started.
func (h *hedge) stop() (started bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	h.timer.Stop()
	return h.started
}

// localWon makes the hedge's local run, into mine, the unit's output.
func (ur *unitRun) localWon(u decode.Unit, mine *column.Batch, l localResult) (*column.Batch, bool, error) {
	if l.err != nil {
		return mine, false, l.err
	}
	ur.countLocal(u, l.took)
	ur.prog.HedgesWon.Add(1)
	return mine, true, nil
}
