package engine_test

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

// slowPeer is an engine.Spill and engine.Hedger whose "peer" computes
// units with the engine's own UnitProcessor (so its output is what a
// real peer's would be) and answers as answer says.
type slowPeer struct {
	up    *engine.UnitProcessor
	after time.Duration
	prog  *engine.Progress
	// answer says how the peer's run of a unit ends; hedged is
	// prog.UnitsHedged as the run began.
	answer func(ctx context.Context, p *slowPeer, hedged int64) (ran bool, err error)

	calls, canceled atomic.Int64
}

func (p *slowPeer) Slots() int                                { return 2 }
func (p *slowPeer) Planned(*decode.Plan)                      {}
func (p *slowPeer) Watch(context.Context, func() engine.Load) {}
func (p *slowPeer) HedgeAfter() time.Duration                 { return p.after }

func (p *slowPeer) RunUnit(ctx context.Context, u decode.Unit, out *column.Batch, _ engine.Load) (bool, error) {
	p.calls.Add(1)
	hedged := p.prog.UnitsHedged.Load()
	if err := p.up.Compute(ctx, u, out); err != nil {
		return false, err
	}
	ran, err := p.answer(ctx, p, hedged)
	if ctx.Err() != nil {
		p.canceled.Add(1)
	}
	return ran, err
}

// hedgeStarted waits until a hedge has begun since the run started, or ctx
// ends.
func hedgeStarted(ctx context.Context, prog *engine.Progress, before int64) bool {
	for prog.UnitsHedged.Load() <= before {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Millisecond):
		}
	}
	return true
}

const hedgeJob = `
version: 1
name: hedge
inputs: [INPUT]
batch: {size: 100, last: drop}
world_size: 2
epochs: 1
seed: 3
shuffle: {units: true, buffer: 400}
decode: {max_unit_rows: 700, workers: 1}
pipeline:
  - filter: "label == 1 or row_id % 3 == 0"
  - sequence: {column: seq_0, length: 8}
ring: {dir: RINGDIR, slots: 4}
`

// TestHedging: a unit whose peer is slow is started here too once a
// local worker is idle, and the first complete result is the unit's.
// Whichever side wins, the batches are the local run's byte for byte,
// and only the winner is counted.
func TestHedging(t *testing.T) {
	src := strings.ReplaceAll(hedgeJob, "INPUT", "../testdata/small")
	want := runTensors(t, src, nil)
	cases := []struct {
		name   string
		answer func(ctx context.Context, p *slowPeer, hedged int64) (bool, error)
		check  func(t *testing.T, p *slowPeer, prog *engine.Progress)
	}{
		{"the peer never answers: the local run wins",
			func(ctx context.Context, p *slowPeer, _ int64) (bool, error) {
				select { // without a hedge, the unit is declined late
				case <-ctx.Done():
					return false, ctx.Err()
				case <-time.After(2 * time.Second):
					return false, nil
				}
			},
			func(t *testing.T, p *slowPeer, prog *engine.Progress) {
				if prog.UnitsHedged.Load() == 0 || prog.HedgesWon.Load() != prog.UnitsHedged.Load() || p.canceled.Load() == 0 {
					t.Errorf("hedged %d, won here %d, peer runs canceled %d", prog.UnitsHedged.Load(), prog.HedgesWon.Load(), p.canceled.Load())
				}
				if prog.UnitsSpilled.Load() != 0 {
					t.Errorf("%d units counted as spilled from a peer that never answered", prog.UnitsSpilled.Load())
				}
			}},
		{"the peer answers once the hedge has begun: the peer wins",
			func(ctx context.Context, p *slowPeer, hedged int64) (bool, error) {
				if !hedgeStarted(ctx, p.prog, hedged) {
					return false, ctx.Err()
				}
				return true, nil
			},
			func(t *testing.T, p *slowPeer, prog *engine.Progress) {
				if prog.UnitsHedged.Load() == 0 || prog.HedgesWon.Load() != 0 || prog.UnitsSpilled.Load() == 0 {
					t.Errorf("hedged %d, won here %d, spilled %d", prog.UnitsHedged.Load(), prog.HedgesWon.Load(), prog.UnitsSpilled.Load())
				}
			}},
		{"the peer gives up once the hedge has begun: the local run is the unit's",
			func(ctx context.Context, p *slowPeer, hedged int64) (bool, error) {
				hedgeStarted(ctx, p.prog, hedged)
				return false, ctx.Err()
			},
			func(t *testing.T, p *slowPeer, prog *engine.Progress) {
				if prog.UnitsHedged.Load() == 0 || prog.HedgesWon.Load() == 0 || prog.UnitsSpilled.Load() != 0 {
					t.Errorf("hedged %d, won here %d, spilled %d", prog.UnitsHedged.Load(), prog.HedgesWon.Load(), prog.UnitsSpilled.Load())
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prog := new(engine.Progress)
			p := &slowPeer{up: unitProcessor(t, src), after: 5 * time.Millisecond, prog: prog, answer: c.answer}
			// A slow CPU token: a hedge's local run takes at least this
			// long, so a peer that answers as the hedge begins wins.
			gate := func(ctx context.Context) (func(), error) {
				select {
				case <-time.After(20 * time.Millisecond):
					return func() {}, nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			got := runTensorsWith(t, src, engine.Options{Spill: p, Progress: prog, Gate: gate})
			sameTensors(t, got, want)
			if done := prog.UnitsDone.Load(); done != int64(unitCount(t, src)) {
				t.Errorf("%d units counted done, the plan has %d", done, unitCount(t, src))
			}
			c.check(t, p, prog)
			t.Logf("peer calls %d, canceled %d; hedged %d, won here %d, spilled %d", p.calls.Load(), p.canceled.Load(),
				prog.UnitsHedged.Load(), prog.HedgesWon.Load(), prog.UnitsSpilled.Load())
		})
	}
}

// TestNoHedgeBesideBusyWorkers: a hedge takes an idle local worker's
// place and never computes beside a full set of busy local workers: with
// one local worker, at most one unit computes here at any moment.
func TestNoHedgeBesideBusyWorkers(t *testing.T) {
	src := strings.ReplaceAll(hedgeJob, "INPUT", "../testdata/small")
	want := runTensors(t, src, nil)
	// Whether a hedge starts at all depends on the local worker going
	// idle while a peer holds a unit; on a loaded machine a run may end
	// without one. Each run is checked; runs repeat until one hedged.
	for range 5 {
		if hedgeBesideBusyWorkers(t, src, want) {
			return
		}
	}
	t.Fatal("no unit was hedged in 5 runs: the test shows nothing")
}

// hedgeBesideBusyWorkers runs src with one local worker and a slow peer,
// checks its batches against want and that no two units computed here at
// once, and reports whether a unit was hedged.
func hedgeBesideBusyWorkers(t *testing.T, src string, want [][][]byte) bool {
	t.Helper()
	prog := new(engine.Progress)
	var computing, most atomic.Int64
	gate := func(ctx context.Context) (func(), error) {
		n := computing.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(3 * time.Millisecond) // a unit's compute, long enough to overlap
		return func() { computing.Add(-1) }, nil
	}
	p := &slowPeer{up: unitProcessor(t, src), after: time.Millisecond, prog: prog,
		answer: func(ctx context.Context, p *slowPeer, _ int64) (bool, error) {
			select {
			case <-time.After(20 * time.Millisecond):
				return true, nil
			case <-ctx.Done():
				return false, ctx.Err()
			}
		}}
	got := runTensorsWith(t, src, engine.Options{Spill: p, Progress: prog, Gate: gate})
	sameTensors(t, got, want)
	if most.Load() > 1 {
		t.Errorf("%d units computed here at once with one local worker", most.Load())
	}
	t.Logf("hedged %d, won here %d, spilled %d", prog.UnitsHedged.Load(), prog.HedgesWon.Load(), prog.UnitsSpilled.Load())
	return prog.UnitsHedged.Load() > 0
}

func unitProcessor(t *testing.T, src string) *engine.UnitProcessor {
	t.Helper()
	job, err := spec.Parse("test.yaml", []byte(strings.ReplaceAll(src, "RINGDIR", t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	up, err := engine.NewUnitProcessor(context.Background(), job, decode.OSFS{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	return up
}

func unitCount(t *testing.T, src string) int {
	t.Helper()
	job, err := spec.Parse("test.yaml", []byte(strings.ReplaceAll(src, "RINGDIR", t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	fp, err := engine.EstimateFootprint(context.Background(), job, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fp.Units
}

func sameTensors(t *testing.T, got, want [][][]byte) {
	t.Helper()
	if len(got) != len(want) || len(want[0]) == 0 {
		t.Fatalf("%d ranks, want %d (and batches: %d)", len(got), len(want), len(want[0]))
	}
	for r := range want {
		if len(got[r]) != len(want[r]) {
			t.Fatalf("rank %d: %d batches, the local run %d", r, len(got[r]), len(want[r]))
		}
		for i := range want[r] {
			if !bytes.Equal(got[r][i], want[r][i]) {
				t.Fatalf("rank %d batch %d differs from the local run's", r, i)
			}
		}
	}
}
