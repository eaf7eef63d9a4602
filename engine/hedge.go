package engine

import (
	"context"
	"errors"
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
// Steps: start the peer run on its own goroutine; every HedgeAfter,
// while it has not answered, try to claim an idle local worker; once one
// is claimed, compute here on the spill worker's own decoder (the peer
// run needs none) and take whichever finishes first.
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

type peerResult struct {
	ok  bool
	err error
}

type localResult struct {
	took time.Duration
	err  error
}

// hedged runs the epoch's i-th unit on a peer into buf, and here as well
// once it has waited after with a local worker idle. It returns the
// winner's batch; done is false when neither produced the unit (the peer
// declined or failed before a hedge started) and the worker must compute
// it here, into the batch returned.
func (ur *unitRun) hedged(ctx context.Context, worker, i int, buf *column.Batch, load Load,
	after time.Duration) (*column.Batch, bool, error) {
	u := ur.proc.plan.Units[ur.units[i]]
	pctx, cancelPeer := context.WithCancelCause(ctx)
	defer cancelPeer(nil)
	peer := make(chan peerResult, 1)
	go func() {
		ok, err := ur.onPeer(pctx, u, buf, load)
		peer <- peerResult{ok, err}
	}()
	release, r := ur.waitToHedge(peer, after)
	if release == nil {
		if r.ok {
			ur.acceptSpilled(u, buf)
		}
		return buf, r.ok, r.err
	}
	defer release()
	ur.prog.UnitsHedged.Add(1)
	lctx, cancelLocal := context.WithCancel(ctx)
	defer cancelLocal()
	mine := ur.spare.get()
	local := make(chan localResult, 1)
	go func() {
		took, err := ur.computeHere(lctx, worker, i, mine)
		local <- localResult{took, err}
	}()
	select {
	case r := <-peer:
		if r.ok || r.err != nil {
			// The peer's answer came first (or the run is stopping).
			cancelLocal()
			<-local
			ur.spare.put(mine)
			if r.ok {
				ur.acceptSpilled(u, buf)
			}
			return buf, r.ok, r.err
		}
		// The peer gave up: the local run is the unit's.
		l := <-local
		ur.spare.put(buf)
		return ur.localWon(u, mine, l)
	case l := <-local:
		if l.err == nil || ctx.Err() != nil {
			cancelPeer(ErrHedged)
		}
		// A local run that failed leaves the unit to the peer, if it
		// answers (a local-only run would have failed here).
		if r := <-peer; l.err != nil && r.ok {
			ur.spare.put(mine)
			ur.acceptSpilled(u, buf)
			return buf, true, nil
		}
		ur.spare.put(buf)
		return ur.localWon(u, mine, l)
	}
}

// waitToHedge waits for the peer's answer (which comes once ctx ends, at
// the latest), trying every after to claim an idle local worker for a
// hedge. It returns the claim's release, or nil and the peer's result
// when that came first.
func (ur *unitRun) waitToHedge(peer <-chan peerResult, after time.Duration) (release func(), r peerResult) {
	tick := time.NewTicker(after)
	defer tick.Stop()
	for {
		select {
		case r := <-peer:
			return nil, r
		case <-tick.C:
			if release, ok := ur.claimIdle(); ok {
				return release, peerResult{}
			}
		}
	}
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
