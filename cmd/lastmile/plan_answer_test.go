package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/bench"
	"github.com/lastmile/lastmile/engine"
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

// TestPlanCautionsSpecDecodeWorkersBelowCores: the curve is measured
// with a worker per core, whatever the spec's decode.workers; a spec
// that sets fewer workers than the predicted cores decodes on no more
// cores than it has workers when submitted, and would not reach the
// target with the cores the answer asks for. The answer must say so,
// naming the key and the value to set.
func TestPlanCautionsSpecDecodeWorkersBelowCores(t *testing.T) {
	if testing.Short() {
		t.Skip("measures")
	}
	dir := t.TempDir()
	data, _ := filepath.Abs("../../testdata/small")
	for _, tc := range []struct {
		workers string // the spec's decode.workers; "" for none
		warn    bool
	}{{"1", true}, {"", false}, {"256", false}} {
		t.Run("workers="+tc.workers, func(t *testing.T) {
			decode := ""
			if tc.workers != "" {
				decode = "decode: {workers: " + tc.workers + "}\n"
			}
			specPath := filepath.Join(dir, "job.yaml")
			src := fmt.Sprintf("version: 1\nname: small\ninputs: [%s]\ncolumns: [row_id, label, dense_0]\nbatch: {size: 250, last: drop}\nring: {slots: 4}\n%s", data, decode)
			if err := os.WriteFile(specPath, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			// Far more than one core's rate (about a million samples/s
			// here), within a 64-core host's.
			out := runPlanJSON(t, dir, "-gpus", "8", "-samples-per-gpu", "2e6", "-host-cores", "256", specPath)
			if out.Prediction.CoresPerHost < 2 {
				t.Skipf("the prediction asks for %d core(s): nothing to check", out.Prediction.CoresPerHost)
			}
			want := fmt.Sprintf("decode.workers: %d", out.Prediction.CoresPerHost)
			if warned := strings.Contains(out.Answer, want); warned != tc.warn {
				t.Errorf("decode.workers %q, %d cores predicted: answer %q; want a caution naming %q: %v", tc.workers, out.Prediction.CoresPerHost, out.Answer, want, tc.warn)
			}
		})
	}
}

// runPlanJSON runs lastmile plan -json, briefly, on one core.
func runPlanJSON(t *testing.T, dir string, args ...string) planOutput {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args = append([]string{"plan", "-json", "-measure-cores", "1", "-seconds", "0.3", "-warmup", "0.1", "-loads", "0.5",
		"-python=false", "-svg", "", "-shm-dir", dir}, args...)
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("plan exited %d: %s", code, stderr.String())
	}
	var out planOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPlanArenaMemoryAtTheTargetsSize: with ring.arena the daemon
// charges the unit arena's file, whose chunks are the units in flight
// plus those the rings' unreleased batches name: it grows with the
// ranks and the workers. The plan took it at the spec's world_size and
// this machine's CPUs, not at -gpus and the predicted cores it answers
// for, so its memory was not what lastmiled charges that job.
func TestPlanArenaMemoryAtTheTargetsSize(t *testing.T) {
	if testing.Short() {
		t.Skip("measures")
	}
	dir := t.TempDir()
	data, _ := filepath.Abs("../../testdata/small")
	specPath := filepath.Join(dir, "job.yaml")
	src := fmt.Sprintf("version: 1\nname: small\ninputs: [%s]\ncolumns: [row_id, label, dense_0]\nbatch: {size: 50, last: drop}\n"+
		"ring: {slots: 2, arena: true}\n", data)
	if err := os.WriteFile(specPath, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, gpus := range []int{1, 4} {
		t.Run(fmt.Sprint(gpus, "gpus"), func(t *testing.T) {
			out := runPlanJSON(t, dir, "-gpus", fmt.Sprint(gpus), "-samples-per-gpu", fmt.Sprint(1e6/gpus), "-host-cores", "64", specPath)
			job, err := readJob(context.Background(), specPath)
			if err != nil {
				t.Fatal(err)
			}
			// The job as lastmiled runs it for this answer: submitted
			// with world_size -gpus on a daemon whose decode tokens are
			// the predicted cores (2 workers each, 2 units per worker).
			job.WorldSize = gpus
			job.Decode.Workers = 2 * out.Prediction.CoresPerHost
			fp, err := engine.EstimateFootprint(context.Background(), job, nil)
			if err != nil {
				t.Fatal(err)
			}
			if fp.ArenaBytes == 0 {
				t.Fatal("the job has no arena: the test needs whole units")
			}
			if got, want := out.Prediction.MemoryBytes, fp.Bytes(); got != want {
				t.Errorf("%d GPUs, %d cores: plan says %d bytes of memory; the daemon charges %d (arena %d, rings %d, %d units in flight of %d)",
					gpus, out.Prediction.CoresPerHost, got, want, fp.ArenaBytes, fp.RingBytes, fp.InFlight, fp.UnitBytes)
			}
		})
	}
}

// TestPlanInfeasibleWithPeersSaysWhatItCounts: an infeasible answer
// said "With 4 core(s) it gives X samples/s", but X was the host's
// cores and the peers together.
func TestPlanInfeasibleWithPeersSaysWhatItCounts(t *testing.T) {
	// 4 host cores of 1,000 samples/s; receiving caps what peers can
	// add at 4/1.5e-4 ≈ 26,667 samples/s, under 8 × 5,000.
	m := plan.Measured{Curve: plan.Curve{PerCore: 1000, Ceiling: 1e7}, BatchSize: 256, BytesPerSample: 100e3, ReceiveCPUPerByte: 1.5e-9}
	res := plan.Resources{HostCores: 4, PeerCores: 64, NetworkBytesPerSec: 1e12}
	tg := plan.Target{GPUs: 8, SamplesPerGPU: 5000}
	p, err := plan.Predict(tg, m, res)
	if err != nil || p.Feasible || p.Peers == 0 {
		t.Fatalf("%+v, %v: want an infeasible prediction with peers", p, err)
	}
	got := planAnswer("img", planOutput{Target: tg, Resources: res, Prediction: p,
		Measured: &bench.PlanReport{Measured: m, Points: []bench.PlanPoint{{Cores: 1}}}})
	if regexp.MustCompile(`With 4 cores? ?(\(s\))? it gives`).MatchString(got) {
		t.Errorf("answer %q credits the host's 4 cores with what the peers send", got)
	}
	for _, w := range []string{"With the host's 4 cores and " + count(p.Peers, "CPU peer", "CPU peers"), "from the peers"} {
		if !strings.Contains(got, w) {
			t.Errorf("answer %q lacks %q", got, w)
		}
	}
}

// TestPlanStatesAFailedRingDepthSearch: when no ring up to 64 slots
// brings the stall at 90% of capacity under 1%, the stall table showed
// only rows marked "too shallow" and no closing line.
func TestPlanStatesAFailedRingDepthSearch(t *testing.T) {
	pt := func(slots int, stall float64) bench.StallPoint {
		return bench.StallPoint{Load: 0.9, Slots: slots, Window: bench.Window{Stall: stall}}
	}
	for _, tc := range []struct {
		name  string
		r     bench.PlanReport
		wants []string
	}{
		{"failed", bench.PlanReport{Seconds: 3, Dist: "fixed", Stall: []bench.StallPoint{pt(4, 0.05), pt(8, 0.04), pt(16, 0.04), pt(32, 0.03), pt(64, 0.03)}},
			[]string{"64 slots", "no ring depth"}},
		{"found", bench.PlanReport{Seconds: 3, Dist: "fixed", DepthNeeded: 8, Stall: []bench.StallPoint{pt(4, 0.05), pt(8, 0.004)}},
			[]string{"a ring of 8 slots suffices"}},
		{"not needed", bench.PlanReport{Seconds: 3, Dist: "fixed", Stall: []bench.StallPoint{pt(4, 0.001)}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			writeStall(&b, &tc.r)
			for _, w := range tc.wants {
				if !strings.Contains(b.String(), w) {
					t.Errorf("stall table lacks %q:\n%s", w, b.String())
				}
			}
			if tc.name != "failed" && strings.Contains(b.String(), "no ring depth") {
				t.Errorf("stall table says the search failed:\n%s", b.String())
			}
		})
	}
}

// TestPlanWordsForOne: one GPU and one core read "1 GPU" and "1 core",
// not "1 GPUs", "1 cores" or "1 core(s)".
func TestPlanWordsForOne(t *testing.T) {
	m := plan.Measured{Curve: plan.Curve{PerCore: 10000, Ceiling: 1e6}, BatchSize: 1000, BytesPerSample: 1000}
	pts := []bench.PlanPoint{{Cores: 1, Units: 20, Window: bench.Window{Seconds: 4}, CPUSeconds: 1}}
	for _, tc := range []struct {
		name string
		tg   plan.Target
		res  plan.Resources
	}{
		{"feasible", plan.Target{GPUs: 1, SamplesPerGPU: 5000}, plan.Resources{HostCores: 4}},
		{"infeasible", plan.Target{GPUs: 1, SamplesPerGPU: 50000}, plan.Resources{HostCores: 1}},
		{"with peers", plan.Target{GPUs: 1, SamplesPerGPU: 25000}, plan.Resources{HostCores: 1, PeerCores: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := plan.Predict(tc.tg, m, tc.res)
			if err != nil {
				t.Fatal(err)
			}
			out := planOutput{Target: tc.tg, Resources: tc.res, Prediction: p, Measured: &bench.PlanReport{Measured: m, Points: pts, Seconds: 3, Dist: "fixed"},
				Validation: &bench.Validation{Cores: 1}}
			out.Answer = planAnswer("ctr", out)
			var b bytes.Buffer
			writePlan(&b, out)
			text := strings.ReplaceAll(b.String(), "\n", " ")
			for _, bad := range []string{"(s)", "1 GPUs", " 1 cores", "Validation at 1 cores", "all 1 of", "1 cores are"} {
				if strings.Contains(text, bad) {
					t.Errorf("report has %q:\n%s", bad, b.String())
				}
			}
			if !strings.Contains(text, "1 GPU ×") || !strings.Contains(out.Answer, "To feed 1 GPU at") {
				t.Errorf("report lacks \"1 GPU ×\" or \"To feed 1 GPU at\":\n%s", b.String())
			}
		})
	}
}
