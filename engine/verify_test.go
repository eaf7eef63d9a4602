package engine_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
)

// lyingPeer is an engine.Spill and engine.Verifier whose "peer" computes
// units with the engine's own UnitProcessor and then changes a value of
// every unit with rows: well-formed output of the right shape, other
// values. Like package peer's Spiller, it stops sending units once a
// mismatch is reported, and has every unit it ran verified from then on.
type lyingPeer struct {
	up    *engine.UnitProcessor
	share float64 // of the units it ran, those verified

	ran, lied, verified atomic.Int64
	caught              atomic.Bool
	mu                  sync.Mutex
	details             []string
}

func (p *lyingPeer) Slots() int                                { return 2 }
func (p *lyingPeer) Planned(*decode.Plan)                      {}
func (p *lyingPeer) Watch(context.Context, func() engine.Load) {}

func (p *lyingPeer) RunUnit(ctx context.Context, u decode.Unit, out *column.Batch, _ engine.Load) (bool, error) {
	if p.caught.Load() {
		return false, nil
	}
	if err := p.up.Compute(ctx, u, out); err != nil {
		return false, err
	}
	for i := range out.Columns {
		if c := &out.Columns[i]; c.Kind == column.Fixed && out.Rows > 0 && len(c.Data) > 0 {
			c.Data[0] ^= 0x5a
			p.lied.Add(1)
			break
		}
	}
	p.ran.Add(1)
	return true, nil
}

func (p *lyingPeer) Ran(decode.Unit, *column.Batch) (bool, func(string)) {
	if !p.caught.Load() && rand.Float64() >= p.share {
		return false, nil
	}
	p.verified.Add(1)
	return true, func(detail string) {
		p.caught.Store(true)
		p.mu.Lock()
		p.details = append(p.details, detail)
		p.mu.Unlock()
	}
}

// TestVerifyCatchesLyingPeer: with every spilled unit verified, a peer
// whose outputs have other values is caught at its first unit with rows,
// each of its units is computed here instead, the batches are the local
// run's byte for byte, and the mismatches are counted.
func TestVerifyCatchesLyingPeer(t *testing.T) {
	src := strings.ReplaceAll(hedgeJob, "INPUT", "../testdata/small")
	want := runTensors(t, src, nil)
	prog := new(engine.Progress)
	p := &lyingPeer{up: unitProcessor(t, src), share: 1}
	got := runTensorsWith(t, src, engine.Options{Spill: p, Progress: prog})
	sameTensors(t, got, want)
	if p.lied.Load() == 0 {
		t.Fatal("the peer changed no unit: the test shows nothing")
	}
	if !p.caught.Load() || prog.VerifyMismatches.Load() != p.lied.Load() {
		t.Errorf("caught %v; %d mismatches counted, the peer lied in %d units", p.caught.Load(), prog.VerifyMismatches.Load(), p.lied.Load())
	}
	if prog.UnitsVerified.Load() != p.ran.Load() {
		t.Errorf("%d units verified of the %d the peer ran", prog.UnitsVerified.Load(), p.ran.Load())
	}
	if done := prog.UnitsDone.Load(); done != int64(unitCount(t, src)) {
		t.Errorf("%d units counted done, the plan has %d", done, unitCount(t, src))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.details) == 0 || !strings.Contains(p.details[0], "values differ") {
		t.Errorf("mismatch details %q", p.details)
	}
	t.Logf("ran %d, lied %d, verified %d, mismatches %d; first: %s", p.ran.Load(), p.lied.Load(),
		prog.UnitsVerified.Load(), prog.VerifyMismatches.Load(), p.details[0])
}

// TestVerifyNone: a Verifier that draws no unit has none computed here
// again: every unit is computed once, here or at the peer, and the
// peer's values are believed.
func TestVerifyNone(t *testing.T) {
	src := strings.ReplaceAll(hedgeJob, "INPUT", "../testdata/small")
	prog := new(engine.Progress)
	p := &lyingPeer{up: unitProcessor(t, src), share: 0}
	var here atomic.Int64
	gate := func(context.Context) (func(), error) { here.Add(1); return func() {}, nil }
	runTensorsWith(t, src, engine.Options{Spill: p, Progress: prog, Gate: gate})
	if p.ran.Load() == 0 {
		t.Fatal("no unit was spilled: the test shows nothing")
	}
	if prog.UnitsVerified.Load() != 0 || p.verified.Load() != 0 || p.caught.Load() {
		t.Errorf("%d units verified (%d drawn), caught %v at verify 0", prog.UnitsVerified.Load(), p.verified.Load(), p.caught.Load())
	}
	if local := prog.UnitsDone.Load() - prog.UnitsSpilled.Load(); here.Load() != local {
		t.Errorf("%d units computed here, %d counted done here: a spilled unit was computed again", here.Load(), local)
	}
}

// slowLiar is a lyingPeer that is also a Hedger: each unit it takes
// answers once a hedge of it has begun here, so the peer's lie wins the
// hedge and must still be verified.
type slowLiar struct {
	*lyingPeer
	prog *engine.Progress
}

func (p slowLiar) HedgeAfter() time.Duration { return time.Millisecond }

func (p slowLiar) RunUnit(ctx context.Context, u decode.Unit, out *column.Batch, load engine.Load) (bool, error) {
	hedged := p.prog.UnitsHedged.Load()
	ran, err := p.lyingPeer.RunUnit(ctx, u, out, load)
	if !ran || err != nil {
		return ran, err
	}
	wait, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	hedgeStarted(wait, p.prog, hedged)
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	return true, nil
}

// TestVerifyAfterHedgeLost: a lying peer's answer that wins its unit's
// hedge is verified too, once the hedge has given back its local
// worker's place: with one local worker, a verification that waited for
// a second place would never start.
func TestVerifyAfterHedgeLost(t *testing.T) {
	src := strings.ReplaceAll(hedgeJob, "INPUT", "../testdata/small")
	want := runTensors(t, src, nil)
	// The hedge's local run waits on a slow CPU token, so the peer's
	// answer, given once the hedge has begun, comes first.
	gate := func(ctx context.Context) (func(), error) {
		select {
		case <-time.After(20 * time.Millisecond):
			return func() {}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	for range 5 {
		prog := new(engine.Progress)
		p := slowLiar{&lyingPeer{up: unitProcessor(t, src), share: 1}, prog}
		got := runTensorsWith(t, src, engine.Options{Spill: p, Progress: prog, Gate: gate})
		sameTensors(t, got, want)
		t.Logf("hedged %d, won here %d, spilled %d, verified %d, mismatches %d", prog.UnitsHedged.Load(), prog.HedgesWon.Load(),
			prog.UnitsSpilled.Load(), prog.UnitsVerified.Load(), prog.VerifyMismatches.Load())
		if prog.UnitsHedged.Load() > prog.HedgesWon.Load() && prog.VerifyMismatches.Load() > 0 {
			return
		}
	}
	t.Fatal("no lying answer won its hedge in 5 runs: the test shows nothing")
}

// TestVerifyCountsTheOutputUsed: a verified unit is counted done once,
// as spilled when the peer's output is the unit's and as computed here
// when the local one is (a mismatch): the spilled units are those whose
// peer output was delivered, not those a liar answered.
func TestVerifyCountsTheOutputUsed(t *testing.T) {
	src := strings.ReplaceAll(hedgeJob, "INPUT", "../testdata/small")
	prog := new(engine.Progress)
	p := &lyingPeer{up: unitProcessor(t, src), share: 1}
	runTensorsWith(t, src, engine.Options{Spill: p, Progress: prog})
	if prog.VerifyMismatches.Load() == 0 {
		t.Fatal("no mismatch: the test shows nothing")
	}
	if done := prog.UnitsDone.Load(); done != int64(unitCount(t, src)) {
		t.Errorf("%d units counted done, the plan has %d", done, unitCount(t, src))
	}
	if sp, want := prog.UnitsSpilled.Load(), p.ran.Load()-prog.VerifyMismatches.Load(); sp != want {
		t.Errorf("%d units counted spilled; the peer ran %d, %d of them replaced here: want %d", sp, p.ran.Load(), prog.VerifyMismatches.Load(), want)
	}
}
