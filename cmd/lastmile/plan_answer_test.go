package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/bench"
	"github.com/lastmile/lastmile/plan"
)

// TestPlanMeasuredPeerWithoutSamples: a measured peer that returned no
// samples in its window has a rate per core of 0, which Predict reads as
// "a local core's rate": a peer that produced nothing was credited a
// local core's rate, and the answer sized peers from it. It must not be
// counted, and the answer must say why.
func TestPlanMeasuredPeerWithoutSamples(t *testing.T) {
	m := plan.Measured{Curve: plan.Curve{PerCore: 10000, Ceiling: 1e7}, BatchSize: 1000, BytesPerSample: 1000}
	tg := plan.Target{GPUs: 8, SamplesPerGPU: 20000} // 160k samples/s: 4 host cores give 40k
	for _, tc := range []struct {
		name      string
		peerCores int // -peer-cores; 0: the measured peer's workers
		pm        bench.PeerMeasure
	}{
		{"no samples", 0, bench.PeerMeasure{Addr: "10.0.0.2:7941", Workers: 8, InFlight: 16, Units: 6, Seconds: 3, WirePerByte: 1}},
		{"no samples, -peer-cores 16", 16, bench.PeerMeasure{Addr: "10.0.0.2:7941", Workers: 8, InFlight: 16, Units: 6, Seconds: 3, WirePerByte: 1}},
		{"no units", 0, bench.PeerMeasure{Addr: "10.0.0.2:7941", Workers: 8, InFlight: 16, Seconds: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &planFlags{peerCores: tc.peerCores, recvGB: 1.5}
			mm, res := peerFigures(m, plan.Resources{HostCores: 4, PeerCores: tc.peerCores}, f, &tc.pm)
			p, err := plan.Predict(tg, mm, res)
			if err != nil {
				t.Fatal(err)
			}
			if p.Peers != 0 || p.Feasible {
				t.Errorf("a peer that produced nothing: %d peers, feasible %v, capacity %.0f: want it not counted (infeasible on 4 cores)", p.Peers, p.Feasible, p.Capacity)
			}
			out := planOutput{Target: tg, Resources: res, Prediction: p, Peer: &tc.pm,
				Measured: &bench.PlanReport{Measured: mm, Points: []bench.PlanPoint{{Cores: 1}}}}
			out.Answer = planAnswer("ctr", out)
			if !strings.Contains(out.Answer, tc.pm.Addr) || !strings.Contains(out.Answer, "no samples") {
				t.Errorf("answer %q: want it to say that the peer at %s produced no samples and is not counted", out.Answer, tc.pm.Addr)
			}
			var text bytes.Buffer
			writePrediction(&text, out)
			if strings.Contains(text.String(), "none configured") {
				t.Errorf("the table says no peers are configured, but one was measured:\n%s", text.String())
			}
		})
	}
}

