package plan_test

import (
	"testing"

	"github.com/lastmile/lastmile/plan"
)

// TestPredictRoundsAsDocumented: docs/planning.md says cores are "rounded
// up to whole cores (2.0000001 is 2, 2.01 is 3)". A need of 2.0000001
// cores on a host of 2 cores therefore fits it; Predict compared the
// unrounded need with the host's cores (within 1e-9 only) and called the
// target out of reach ("needs 2.0 cores but the host gives 2"), or sent
// the rest to peers.
func TestPredictRoundsAsDocumented(t *testing.T) {
	m := plan.Measured{Curve: plan.Curve{PerCore: 10000, Ceiling: 1e6}, BatchSize: 1000, BytesPerSample: 1000}
	for _, tc := range []struct {
		name      string
		perGPU    float64 // 2 GPUs
		hostCores int
		peerCores int
		cores     int
		peers     int
		feasible  bool
	}{
		{"2.0000001 cores fit 2", 10000.0005, 2, 0, 2, 0, true},
		{"2.0000001 cores fit 2, no peers", 10000.0005, 2, 8, 2, 0, true},
		{"2.01 cores do not fit 2", 10050, 2, 0, 3, 0, false},
		{"2.01 cores: the rest to a peer", 10050, 2, 8, 2, 1, true},
		{"exactly 2", 10000, 2, 0, 2, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := plan.Predict(plan.Target{GPUs: 2, SamplesPerGPU: tc.perGPU}, m, plan.Resources{HostCores: tc.hostCores, PeerCores: tc.peerCores})
			if err != nil {
				t.Fatal(err)
			}
			if p.CoresPerHost != tc.cores || p.Peers != tc.peers || p.Feasible != tc.feasible {
				t.Errorf("need %.9f cores: %d cores, %d peers, feasible %v (%q); want %d, %d, %v",
					p.CoresExact, p.CoresPerHost, p.Peers, p.Feasible, p.Notes, tc.cores, tc.peers, tc.feasible)
			}
		})
	}
}

// TestPredictPeersThatWouldNotBeUsed: the daemon spills a unit only when
// receiving its output is expected to cost under 80% of computing it here
// (docs/peers.md, "receiving is cheaper than computing"; peer.Spiller's
// MaxCostRatio, default 0.8, which lastmiled does not change). Where
// receiving costs 80-100% of computing, Predict sized peers the daemon
// would never send a unit to: the plan must say peers cannot help.
func TestPredictPeersThatWouldNotBeUsed(t *testing.T) {
	m := plan.Measured{Curve: plan.Curve{PerCore: 10000, Ceiling: 1e7}, BatchSize: 1000, BytesPerSample: 1000}
	for _, tc := range []struct {
		ratio    float64 // receive CPU per sample over compute CPU per sample
		feasible bool
	}{{0.5, true}, {0.79, true}, {0.8, false}, {0.9, false}, {1.2, false}} {
		m.ReceiveCPUPerByte = tc.ratio / 10000 / 1000 // s per byte: ratio × (1/10000 s per sample) / 1000 bytes
		// 44,800 samples/s: 4 cores give 40,000; the rest is within what
		// they can receive (4/recv: 50,633 samples/s at 79%).
		p, err := plan.Predict(plan.Target{GPUs: 8, SamplesPerGPU: 5600}, m, plan.Resources{HostCores: 4, PeerCores: 64})
		if err != nil {
			t.Fatal(err)
		}
		if p.Feasible != tc.feasible || (!tc.feasible && p.Peers != 0) {
			t.Errorf("receive at %.0f%% of compute: %d peers, feasible %v (%q); want feasible %v", 100*tc.ratio, p.Peers, p.Feasible, p.Notes, tc.feasible)
		}
	}
}

// TestPredictPeersRoundedAsDocumented: peers are ⌈y / a peer's rate⌉ with
// the same forgiveness of the last digits as cores (RoundUp: 3.00000003
// is 3). The feasibility check after it compared the capacity with the
// target within 1e-9 only, so such a target came out infeasible, blamed
// on "the ring's serial stage" although the batcher's ceiling is far
// above it.
func TestPredictPeersRoundedAsDocumented(t *testing.T) {
	m := plan.Measured{Curve: plan.Curve{PerCore: 10000, Ceiling: 1e7}, BatchSize: 1000, BytesPerSample: 1000}
	h := 40000 + 3*80000*(1+3e-8) // 4 host cores give 40k; 3.00000003 peers of 8 cores (80k each)
	p, err := plan.Predict(plan.Target{GPUs: 1, SamplesPerGPU: h}, m, plan.Resources{HostCores: 4, PeerCores: 8})
	if err != nil {
		t.Fatal(err)
	}
	if p.Peers != 3 || !p.Feasible {
		t.Errorf("%d peers, feasible %v (%q): want 3, feasible", p.Peers, p.Feasible, p.Notes)
	}
}
