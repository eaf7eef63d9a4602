package peer

import (
	"testing"
	"time"

	"github.com/lastmile/lastmile/engine"
)

// TestPolicyHysteresis drives the spill decision through a timeline of
// loads: it switches on only after a stall lasts, stays on through short
// recoveries, and off only after the rings stay full or a worker idles.
func TestPolicyHysteresis(t *testing.T) {
	starved := engine.Load{LocalWorkers: 2, LocalBusy: 2, RingFill: 0.1}
	middle := engine.Load{LocalWorkers: 2, LocalBusy: 2, RingFill: 0.5}
	full := engine.Load{LocalWorkers: 2, LocalBusy: 2, RingFill: 0.9}
	idle := engine.Load{LocalWorkers: 2, LocalBusy: 1, RingFill: 0.1}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	steps := []struct {
		at   time.Duration
		load engine.Load
		want bool
	}{
		{0, full, false},
		{ms(10), starved, false},  // a stall begins
		{ms(100), starved, false}, // not long enough
		{ms(150), middle, false},  // it cleared: the clock restarts
		{ms(160), starved, false},
		{ms(300), starved, false},
		{ms(380), starved, true}, // 220 ms of stall: on
		{ms(400), middle, true},  // in between: stays on
		{ms(500), full, true},    // full, but not for long
		{ms(600), middle, true},  // back in between: the off clock restarts
		{ms(700), full, true},
		{ms(2600), full, true},
		{ms(2800), full, false}, // full for 2.1 s: off
		{ms(2900), idle, false}, // idle workers are no stall
		{ms(3500), idle, false},
		{ms(3600), starved, false},
		{ms(3900), starved, true},
		{ms(4000), idle, true},
		{ms(6100), idle, false}, // a worker idle for 2.1 s: off
	}
	p := newPolicy(PolicyConfig{}, nil)
	t0 := time.Now()
	for _, s := range steps {
		if got, why := p.decide(s.load, t0.Add(s.at)); got != s.want {
			t.Fatalf("at %v with %+v: spill %v (%s), want %v", s.at, s.load, got, why, s.want)
		}
	}
	if on, _, why, flips := p.state(); on || flips != 4 || why != "a local worker is idle" {
		t.Errorf("state: on %v, %d switches, last because %q", on, flips, why)
	}
}
