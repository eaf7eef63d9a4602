package plan_test

import (
	"math"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/plan"
)

// TestPeersBeyondTheHostsReceive: a spilled sample costs the host
// recv CPU seconds to receive, so a host of H cores can take at most H/recv
// samples/s from its peers, however many there are. Predict solved
// y = (h − cores·e)/(1 − recv·e) without that bound: for a target above it
// the prediction came out feasible with more receive cores than the host
// has and a negative local rate.
func TestPeersBeyondTheHostsReceive(t *testing.T) {
	// 4 host cores of 1,000 samples/s each (100 KB samples, images);
	// receiving costs 1.5 s per GB: 1.5e-4 s a sample, 15% of computing
	// it (under the 80% rule), so at most 4/1.5e-4 ≈ 26,667 samples/s can
	// be received.
	m := plan.Measured{Curve: plan.Curve{PerCore: 1000, Ceiling: 1e7}, BatchSize: 256, BytesPerSample: 100e3,
		ReceiveCPUPerByte: 1.5e-9}
	res := plan.Resources{HostCores: 4, PeerCores: 64, NetworkBytesPerSec: 1e12}
	for _, tc := range []struct {
		name     string
		perGPU   float64 // 8 GPUs
		feasible bool
	}{
		{"well under the receive bound", 2000, true}, // 16k samples/s
		{"over the receive bound", 5000, false},      // 40k samples/s
		{"far over the receive bound", 50000, false}, // 400k samples/s
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := plan.Predict(plan.Target{GPUs: 8, SamplesPerGPU: tc.perGPU}, m, res)
			if err != nil {
				t.Fatal(err)
			}
			if p.Feasible != tc.feasible {
				t.Errorf("feasible %v, want %v: %d peers, receive cores %.1f of 4, local rate %.0f, capacity %.0f (%q)",
					p.Feasible, tc.feasible, p.Peers, p.ReceiveCores, p.LocalRate, p.Capacity, p.Notes)
			}
			if p.ReceiveCores > float64(res.HostCores)*(1+1e-9) || p.LocalRate < 0 {
				t.Errorf("receive cores %.1f of the host's %d, local rate %.0f: the host cannot do that", p.ReceiveCores, res.HostCores, p.LocalRate)
			}
			if p.Capacity > 4/(1.5e-4)*(1+1e-9) {
				t.Errorf("capacity %.0f samples/s over what 4 cores can receive (26,667)", p.Capacity)
			}
			if !tc.feasible && !strings.Contains(strings.Join(p.Notes, "; "), "receiv") {
				t.Errorf("notes %q do not say receiving is what binds", p.Notes)
			}
		})
	}
}

// TestTargetOverflow: a target whose total over the GPUs is not a
// finite number (8 × 1e308 samples/s) is no target: Predict took it and
// gave +Inf figures that JSON cannot carry.
func TestTargetOverflow(t *testing.T) {
	m := plan.Measured{Curve: plan.Curve{PerCore: 1000, Ceiling: 1e7}, BatchSize: 256, BytesPerSample: 100}
	for _, tg := range []plan.Target{{GPUs: 8, SamplesPerGPU: 1e308}, {GPUs: 1, SamplesPerGPU: math.Inf(1)}} {
		if p, err := plan.Predict(tg, m, plan.Resources{HostCores: 4}); err == nil {
			t.Errorf("Predict(%+v) = host rate %g, no error", tg, p.HostRate)
		}
	}
}
