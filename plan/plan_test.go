package plan_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/plan"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b)) }

func TestFit(t *testing.T) {
	amdahl := func(k, per, s float64) float64 { return k * per / (1 + s*(k-1)) }
	tests := []struct {
		name        string
		points      []plan.Point
		ceiling     float64
		per, serial float64
	}{
		{"one point is a line", []plan.Point{{1, 1000}}, 0, 1000, 0},
		{"linear", []plan.Point{{1, 1000}, {2, 2000}, {4, 4000}}, 0, 1000, 0},
		{"amdahl 0.2", []plan.Point{{1, amdahl(1, 500, 0.2)}, {2, amdahl(2, 500, 0.2)}, {4, amdahl(4, 500, 0.2)}}, 0, 500, 0.2},
		{"no gain from a second core", []plan.Point{{1, 800}, {2, 800}}, 0, 800, 1},
		{"bad points ignored", []plan.Point{{0, 5}, {1, 1000}, {2, math.NaN()}, {3, -1}}, 0, 1000, 0},
		{"unsorted, repeated cores", []plan.Point{{2, 2000}, {1, 1000}, {1, 1000}}, 0, 1000, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := plan.Fit(tc.points, tc.ceiling)
			if err != nil {
				t.Fatal(err)
			}
			if !near(c.PerCore, tc.per, 1e-3) || !near(c.Serial, tc.serial, 2e-3) {
				t.Errorf("Fit = per core %g, serial %g; want %g, %g", c.PerCore, c.Serial, tc.per, tc.serial)
			}
		})
	}
	if _, err := plan.Fit([]plan.Point{{0, 1}}, 0); err == nil {
		t.Error("Fit without a usable point: no error")
	}
	if _, err := plan.Fit([]plan.Point{{1, 1}}, -1); err == nil {
		t.Error("Fit with a negative ceiling: no error")
	}
}

func TestCurve(t *testing.T) {
	c := plan.Curve{PerCore: 1000, Serial: 0.1, Ceiling: 5000}
	rates := []struct{ cores, want float64 }{
		{0, 0}, {1, 1000}, {2, 2000 / 1.1}, {4, 4000 / 1.3}, {100, 5000},
	}
	for _, r := range rates {
		if got := c.Rate(r.cores); !near(got, r.want, 1e-9) {
			t.Errorf("Rate(%g) = %g, want %g", r.cores, got, r.want)
		}
	}
	if got := c.Limit(); got != 5000 {
		t.Errorf("Limit = %g, want the ceiling 5000", got)
	}
	cores := []struct {
		rate, want float64
		ok         bool
	}{
		{0, 0, true}, {1000, 1, true}, {2000 / 1.1, 2, true}, {5001, math.Inf(1), false},
	}
	for _, r := range cores {
		got, ok := c.CoresFor(r.rate)
		if ok != r.ok || ok && !near(got, r.want, 1e-9) {
			t.Errorf("CoresFor(%g) = %g, %v; want %g, %v", r.rate, got, ok, r.want, r.ok)
		}
	}
	// Amdahl's bound without a ceiling: PerCore/Serial is never reached.
	a := plan.Curve{PerCore: 1000, Serial: 0.5}
	if _, ok := a.CoresFor(2000); ok {
		t.Error("CoresFor at Amdahl's bound: reachable")
	}
	if k, ok := (plan.Curve{PerCore: 1000, Ceiling: 3000}).CoresFor(3000); !ok || k != 3 {
		t.Errorf("CoresFor at a linear curve's ceiling = %g, %v; want 3, true", k, ok)
	}
}

func TestRoundUp(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		want int
	}{{0, 0}, {-1, 0}, {math.NaN(), 0}, {0.2, 1}, {1, 1}, {2.0000001, 2}, {2.01, 3}, {math.Inf(1), math.MaxInt32}} {
		if got := plan.RoundUp(tc.x); got != tc.want {
			t.Errorf("RoundUp(%g) = %d, want %d", tc.x, got, tc.want)
		}
	}
}

// measured is a host whose core makes 10k samples/s, linearly, and whose
// serial stage and client are cheap.
func measured() plan.Measured {
	return plan.Measured{
		Curve:       plan.Curve{PerCore: 10000, Ceiling: 1e6},
		DecodeShare: 0.7, PackPerBatch: 0.001, ClientPerBatch: 0.0001, BatchSize: 1000,
		BytesPerSample: 1000, UnitBytes: 1 << 20, RingBytesPerGPU: 8 << 20,
		ReceiveCPUPerByte: 0.5e-9,
	}
}

func TestPredict(t *testing.T) {
	tests := []struct {
		name     string
		target   plan.Target
		edit     func(*plan.Measured, *plan.Resources)
		cores    int
		peers    int
		binding  string
		feasible bool
		stall    float64
		note     string
	}{
		{name: "fits in the host", target: plan.Target{GPUs: 8, SamplesPerGPU: 2500}, cores: 2, binding: plan.ResDecode, feasible: true},
		{name: "rounds up", target: plan.Target{GPUs: 8, SamplesPerGPU: 2600}, cores: 3, binding: plan.ResDecode, feasible: true},
		{name: "ops bind when they cost more", target: plan.Target{GPUs: 1, SamplesPerGPU: 5000},
			edit: func(m *plan.Measured, _ *plan.Resources) { m.DecodeShare = 0.3 }, cores: 1, binding: plan.ResOps, feasible: true},
		{name: "too big without peers", target: plan.Target{GPUs: 8, SamplesPerGPU: 20000}, cores: 16, binding: plan.ResDecode,
			stall: 1 - 40000.0/160000, note: "configure CPU peers"},
		{name: "peers take the rest", target: plan.Target{GPUs: 8, SamplesPerGPU: 20000},
			// 160k samples/s: 4 host cores give 40k; each spilled sample
			// costs 0.5 µs of receive CPU (0.005 of a core's 10k/s second),
			// so y = 120k/0.995 ≈ 120.6k samples/s from peers of 8 cores
			// (80k/s each): 2 peers.
			edit: func(_ *plan.Measured, r *plan.Resources) { r.PeerCores = 8 }, cores: 4, peers: 2, binding: plan.ResDecode, feasible: true},
		{name: "the trainer's client binds", target: plan.Target{GPUs: 1, SamplesPerGPU: 5000},
			edit: func(m *plan.Measured, _ *plan.Resources) { m.ClientPerBatch = 0.25 }, cores: 1, binding: plan.ResClient, note: "trainer client is over capacity"},
		{name: "the ring binds", target: plan.Target{GPUs: 1, SamplesPerGPU: 30000},
			edit:  func(m *plan.Measured, _ *plan.Resources) { m.PackPerBatch = 0.05; m.Curve.Ceiling = 20000 },
			cores: 2, binding: plan.ResRing, stall: 1 - 20000.0/30000, note: "levels off"},
		{name: "the network binds", target: plan.Target{GPUs: 8, SamplesPerGPU: 20000},
			edit: func(m *plan.Measured, r *plan.Resources) {
				r.PeerCores = 8
				m.BytesPerSample = 20000
				m.ReceiveCPUPerByte = 1e-12
			},
			cores: 4, peers: 2, binding: plan.ResNetwork, note: "network is over capacity"},
		{name: "receiving costs more than computing", target: plan.Target{GPUs: 8, SamplesPerGPU: 20000},
			edit:  func(m *plan.Measured, r *plan.Resources) { r.PeerCores = 8; m.ReceiveCPUPerByte = 1e-6 },
			cores: 4, binding: plan.ResDecode, stall: 0.75, note: "peers cannot help"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, res := measured(), plan.Resources{HostCores: 4}
			if tc.edit != nil {
				tc.edit(&m, &res)
			}
			p, err := plan.Predict(tc.target, m, res)
			if err != nil {
				t.Fatal(err)
			}
			if p.CoresPerHost != tc.cores || p.Peers != tc.peers || p.Binding != tc.binding || p.Feasible != tc.feasible {
				t.Errorf("cores %d, peers %d, binding %q, feasible %v; want %d, %d, %q, %v (%+v)",
					p.CoresPerHost, p.Peers, p.Binding, p.Feasible, tc.cores, tc.peers, tc.binding, tc.feasible, p)
			}
			if !near(p.Stall, tc.stall, 1e-6) {
				t.Errorf("stall %g, want %g", p.Stall, tc.stall)
			}
			if notes := strings.Join(p.Notes, "; "); !strings.Contains(notes, tc.note) {
				t.Errorf("notes %q do not say %q", notes, tc.note)
			}
			if p.Feasible && p.Capacity < p.HostRate*(1-1e-9) {
				t.Errorf("feasible with capacity %g under the target %g", p.Capacity, p.HostRate)
			}
		})
	}
}

func TestPredictPeersArithmetic(t *testing.T) {
	m, res := measured(), plan.Resources{HostCores: 4, PeerCores: 8}
	p, err := plan.Predict(plan.Target{GPUs: 8, SamplesPerGPU: 20000}, m, res)
	if err != nil {
		t.Fatal(err)
	}
	y := 120000 / (1 - 0.5e-9*1000*10000)
	if !near(p.PeerRate, y, 1e-9) || !near(p.NetworkBytesPerSec, y*1000, 1e-9) || !near(p.ReceiveCores, y*0.5e-6, 1e-9) {
		t.Errorf("peer rate %g, network %g, receive cores %g; want %g, %g, %g", p.PeerRate, p.NetworkBytesPerSec, p.ReceiveCores, y, y*1000, y*0.5e-6)
	}
	want := int64(8*(8<<20) + 2*4*(1<<20))
	if p.MemoryBytes != want {
		t.Errorf("memory %d, want %d (8 rings + 2 units per core)", p.MemoryBytes, want)
	}
	if p.CoresPerGPU != 0.5 {
		t.Errorf("cores per GPU %g, want 0.5", p.CoresPerGPU)
	}
	// Output that takes 0.4 bytes on the wire a byte (the compact form)
	// loads the network 0.4 times as much, and nothing else.
	m.WirePerByte = 0.4
	q, err := plan.Predict(plan.Target{GPUs: 8, SamplesPerGPU: 20000}, m, res)
	if err != nil {
		t.Fatal(err)
	}
	if !near(q.NetworkBytesPerSec, y*400, 1e-9) || q.PeerRate != p.PeerRate || q.ReceiveCores != p.ReceiveCores || q.Peers != p.Peers {
		t.Errorf("with 0.4 wire bytes a byte: network %g, want %g; peers %d, rate %g, receive cores %g, as without: %d, %g, %g",
			q.NetworkBytesPerSec, y*400, q.Peers, q.PeerRate, q.ReceiveCores, p.Peers, p.PeerRate, p.ReceiveCores)
	}
}

func TestPredictErrors(t *testing.T) {
	m := measured()
	for _, tc := range []struct {
		t   plan.Target
		m   plan.Measured
		res plan.Resources
	}{
		{plan.Target{GPUs: 0, SamplesPerGPU: 1}, m, plan.Resources{HostCores: 1}},
		{plan.Target{GPUs: 1, SamplesPerGPU: 0}, m, plan.Resources{HostCores: 1}},
		{plan.Target{GPUs: 1, SamplesPerGPU: 1}, m, plan.Resources{}},
		{plan.Target{GPUs: 1, SamplesPerGPU: 1}, plan.Measured{}, plan.Resources{HostCores: 1}},
	} {
		if _, err := plan.Predict(tc.t, tc.m, tc.res); err == nil {
			t.Errorf("Predict(%+v, %+v): no error", tc.t, tc.res)
		}
	}
	if _, err := plan.TargetFromStep(8, 0, 1024); err == nil {
		t.Error("TargetFromStep with a zero step: no error")
	}
	tg, err := plan.TargetFromStep(8, 0.1, 1024)
	if err != nil || tg.SamplesPerGPU != 10240 || tg.HostRate() != 81920 {
		t.Errorf("TargetFromStep(8, 0.1s, 1024) = %+v, %v", tg, err)
	}
}

func TestStallAt(t *testing.T) {
	for _, tc := range []struct{ load, want float64 }{{0, 0}, {0.9, 0}, {1, 0}, {1.25, 0.2}, {2, 0.5}} {
		if got := plan.StallAt(tc.load); !near(got, tc.want, 1e-12) {
			t.Errorf("StallAt(%g) = %g, want %g", tc.load, got, tc.want)
		}
	}
}

func TestNeedAndAdvice(t *testing.T) {
	tests := []struct {
		stall     float64
		cores     float64
		peerCores int
		more      int
		peers     int
		advice    string
	}{
		{0, 4, 0, 0, 0, "fed: no rank waited more than 5% of the last 5m0s; about 30% of its CPU unused"},
		{0.12, 20, 8, 3, 1, "rank 3 waited 12% of the last 5m0s: about 3 more cores or 1 peer"},
		{0.5, 2, 0, 2, 0, "rank 3 waited 50% of the last 5m0s: about 2 more cores"},
		{0.75, 2, 4, 6, 2, "rank 3 waited 75% of the last 5m0s: about 6 more cores or 2 peers"},
		{0.01, 1, 0, 1, 0, "fed"},
	}
	for _, tc := range tests {
		s := plan.Need(tc.stall, 3, tc.cores, tc.peerCores)
		if s.MoreCores != tc.more || s.Peers != tc.peers {
			t.Errorf("Need(%g, cores %g, peer cores %d) = %+v; want %d more cores, %d peers", tc.stall, tc.cores, tc.peerCores, s, tc.more, tc.peers)
		}
		if got := s.Advice(5*time.Minute, 0.05, 0.3); !strings.HasPrefix(got, tc.advice) {
			t.Errorf("Advice = %q, want %q", got, tc.advice)
		}
	}
	if got := plan.Need(1, 0, 2, 0); got.MoreCores != 198 {
		t.Errorf("Need with a rank that only waited = %+v, want 198 more cores (capped at 100x)", got)
	}
}

func TestCurveUnderOneCore(t *testing.T) {
	// Serial 1: a second core adds nothing, but half a core is half a core.
	c := plan.Curve{PerCore: 1000, Serial: 1}
	if got := c.Rate(0.5); got != 500 {
		t.Errorf("Rate(0.5) = %g, want 500", got)
	}
	if k, ok := c.CoresFor(20); !ok || k != 0.02 {
		t.Errorf("CoresFor(20) = %g, %v; want 0.02, true", k, ok)
	}
	p, err := plan.Predict(plan.Target{GPUs: 1, SamplesPerGPU: 20}, plan.Measured{Curve: c}, plan.Resources{HostCores: 2})
	if err != nil || p.CoresPerHost != 1 || p.Stall != 0 {
		t.Errorf("Predict of a tiny target = %d cores, stall %g, %v; want 1 core, no stall", p.CoresPerHost, p.Stall, err)
	}
}
