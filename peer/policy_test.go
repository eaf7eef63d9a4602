package peer

import (
	"testing"
	"time"

	"github.com/lastmile/lastmile/engine"
)

// TestPolicyHysteresis drives the spill decision through phases of steady
// load, sampled every 10 ms: it switches on only after a stall lasts,
// stays on through readings in between, and off only after the rings
// stay full or the workers idle.
func TestPolicyHysteresis(t *testing.T) {
	starved := engine.Load{LocalWorkers: 2, LocalBusy: 2, RingFill: 0.05}
	middle := engine.Load{LocalWorkers: 2, LocalBusy: 2, RingFill: 0.5}
	full := engine.Load{LocalWorkers: 2, LocalBusy: 2, RingFill: 1}
	idle := engine.Load{LocalWorkers: 2, LocalBusy: 0, RingFill: 0.05}
	// A stall with readings that jump (packing bursts): its mean is low.
	bursty := func(i int) engine.Load {
		if i%10 == 0 {
			return engine.Load{LocalWorkers: 2, LocalBusy: 2, RingFill: 0.75}
		}
		return starved
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	phases := []struct {
		what string
		dur  time.Duration
		load func(i int) engine.Load
		want bool
	}{
		{"fed", ms(500), func(int) engine.Load { return full }, false},
		{"a short stall", ms(250), func(int) engine.Load { return starved }, false},
		{"fed again", ms(300), func(int) engine.Load { return full }, false},
		{"a bursty stall that lasts", ms(600), bursty, true},
		{"in between", ms(3000), func(int) engine.Load { return middle }, true},
		{"full, briefly", ms(1000), func(int) engine.Load { return full }, true},
		{"a stall again", ms(100), func(int) engine.Load { return starved }, true},
		{"full for long", ms(2500), func(int) engine.Load { return full }, false},
		{"stall", ms(600), func(int) engine.Load { return starved }, true},
		{"idle workers", ms(2500), func(int) engine.Load { return idle }, false},
	}
	p := newPolicy(PolicyConfig{}, nil)
	now := time.Unix(1000, 0)
	for _, ph := range phases {
		for i := 0; i < int(ph.dur/(10*time.Millisecond)); i++ {
			now = now.Add(10 * time.Millisecond)
			p.observe(ph.load(i), now)
		}
		if got, why := p.current(); got != ph.want {
			t.Fatalf("after %s: spill %v (%s), want %v", ph.what, got, why, ph.want)
		}
	}
	if on, _, why, flips := p.state(); on || flips != 4 || why != "local workers idle" {
		t.Errorf("state: on %v, %d switches, last because %q", on, flips, why)
	}
	if on, why := newPolicy(PolicyConfig{Always: true}, nil).current(); !on {
		t.Errorf("Always is off: %s", why)
	}
}

// TestPolicyStall: a trainer stall the daemon measured turns spill on
// even while the mean ring fill looks fed (a ring that fills in bursts
// between long waits), and keeps it from switching off.
func TestPolicyStall(t *testing.T) {
	stalledFull := engine.Load{LocalWorkers: 2, LocalBusy: 2, RingFill: 1, Stall: 0.2}
	full := engine.Load{LocalWorkers: 2, LocalBusy: 2, RingFill: 1}
	p := newPolicy(PolicyConfig{}, nil)
	now := time.Unix(1000, 0)
	step := func(l engine.Load, d time.Duration) {
		for i := 0; i < int(d/(10*time.Millisecond)); i++ {
			now = now.Add(10 * time.Millisecond)
			p.observe(l, now)
		}
	}
	step(full, time.Second)
	if on, _ := p.current(); on {
		t.Fatal("spill on while fed")
	}
	step(stalledFull, 300*time.Millisecond)
	if on, why := p.current(); !on {
		t.Fatalf("spill off with a measured stall of 20%%: %s", why)
	}
	step(stalledFull, 3*time.Second)
	if on, _ := p.current(); !on {
		t.Fatal("spill switched off while the stall lasts")
	}
	step(full, 2500*time.Millisecond)
	if on, _ := p.current(); on {
		t.Fatal("spill still on after the stall ended and the rings stayed full")
	}
}

// TestPeerSooner: at the end of an epoch a unit stays local when it
// would be done here sooner than behind the peer's queue; mid-epoch it
// goes to the peer.
func TestPeerSooner(t *testing.T) {
	tests := []struct {
		name                      string
		queued, local, busy, left int
		want                      bool
	}{
		{"mid-epoch", 2, 1, 1, 10, true},
		{"the last unit, an idle peer", 0, 1, 1, 0, true},
		{"ending, the local worker has one unit", 2, 1, 1, 1, false},
		{"ending, the local core already has two", 2, 1, 2, 1, true},
		{"ending, a full peer queue", 3, 1, 2, 0, false},
		{"ending, as busy here as there", 3, 1, 3, 0, true},
		{"four local workers, 11 left, queue of 3", 3, 4, 4, 11, false},
		{"four local workers, 12 left", 3, 4, 4, 12, true},
		{"no healthy peer: picking says why", -1, 1, 1, 0, true},
		{"no local workers to compare with", 5, 0, 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := peerSooner(tt.queued, engine.Load{LocalWorkers: tt.local, LocalBusy: tt.busy, UnitsLeft: tt.left})
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPolicyAlwaysReportsOn: with peers.spill: always the spiller spills
// every unit a peer has credit for, so its state (lastmile status JOB's
// spill line, lastmile_spill_on) says on, and why, not "off until
// trainers starve".
func TestPolicyAlwaysReportsOn(t *testing.T) {
	p := newPolicy(PolicyConfig{Always: true}, nil)
	if on, _ := p.current(); !on {
		t.Fatal("an always policy does not spill")
	}
	on, _, why, _ := p.state()
	if !on || why != "peers.spill: always" {
		t.Fatalf("an always policy reports on=%v, reason %q; want on, %q", on, why, "peers.spill: always")
	}
}
