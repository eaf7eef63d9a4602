package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/bench"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/plan"
)

// TestPlanTargetOverflow: -samples-per-gpu 1e308 with -gpus 8 is
// finite per GPU and +Inf over the host. setup let it through, plan
// measured for the whole run and then printed "+Inf samples/s in all",
// wrote NaN into the plot, and -json failed ("json: unsupported value:
// +Inf", exit 1). It must be a usage error before anything is measured.
func TestPlanTargetOverflow(t *testing.T) {
	job, err := readJob(context.Background(), "../../examples/tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := parsePlanFlags([]string{"-samples-per-gpu", "1e308", "-gpus", "8", "job.yaml"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.setup(job); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "-samples-per-gpu") {
		t.Errorf("setup gave %v, want a usage error naming -samples-per-gpu", err)
	}
}

// TestPlanUnreachablePeer: docs/planning.md says "the config is read
// and the peers dialled before anything is measured, so a config that
// cannot work is refused at once". openPeers only made the pool (gRPC
// dials lazily), so a peer nobody listens on was found out after the
// whole measurement (minutes at the defaults), when the peer was asked
// its workers.
func TestPlanUnreachablePeer(t *testing.T) {
	dir := t.TempDir()
	data, _ := filepath.Abs("../../testdata/small")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nobody listens there now
	conf := filepath.Join(dir, "lastmiled.yaml")
	specPath := filepath.Join(dir, "job.yaml")
	for path, text := range map[string]string{
		conf: fmt.Sprintf("roots: {small: %s}\npeers: {addrs: [%q], insecure: true, credits: 2}\n", data, addr),
		specPath: fmt.Sprintf("version: 1\nname: small\ninputs: [%s]\ncolumns: [row_id, label, dense_0]\nbatch: {size: 250, last: drop}\n"+
			"ring: {slots: 4}\ndecode: {max_unit_rows: 1000}\n", data),
	} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	code := run(ctx, []string{"plan", "-gpus", "1", "-samples-per-gpu", "1000", "-measure-cores", "1", "-seconds", "2",
		"-warmup", "0.1", "-loads", "0.5", "-python=false", "-svg", "", "-shm-dir", dir, "-peers-config", conf, specPath}, io.Discard, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), addr) || !strings.Contains(stderr.String(), "-peers-config") {
		t.Errorf("exit %d: %s; want an error naming -peers-config and the peer %s", code, stderr.String(), addr)
	}
	if strings.Contains(stderr.String(), "throughput with") {
		t.Errorf("the pipeline was measured before the peer was found unreachable:\n%s", stderr.String())
	}
}

// TestPlanStallWindow: the stall table's heading printed the window
// with %.0f, so -seconds 0.5 read "steps of a fixed time, 0s each".
func TestPlanStallWindow(t *testing.T) {
	var out bytes.Buffer
	writeStall(&out, &bench.PlanReport{Seconds: 0.5, Dist: "fixed"})
	if !strings.Contains(out.String(), "0.5s each") {
		t.Errorf("stall heading %q: want the 0.5 s window", strings.SplitN(out.String(), "\n", 3)[1])
	}
}

// TestPlanMemoryIsTheDaemonsCharge: docs/planning.md takes the
// memory figures from "the daemon's own estimate (engine.EstimateFootprint),
// the same it charges a submitted job", but the prediction added only the
// rings, 2 units per core and the cache: the shuffle window and the side
// tables the daemon charges were left out, and a spec's own
// decode.inflight was replaced by 2 per core. A job sized by the plan's
// memory figure could be refused by the daemon's max_memory.
func TestPlanMemoryIsTheDaemonsCharge(t *testing.T) {
	if testing.Short() {
		t.Skip("measures")
	}
	dir := t.TempDir()
	data, _ := filepath.Abs("../../testdata/small")
	for _, inflight := range []string{", inflight: 64", ""} {
		t.Run(inflight, func(t *testing.T) { planMemoryCase(t, dir, data, inflight) })
	}
}

func planMemoryCase(t *testing.T, dir, data, inflight string) {
	specPath := filepath.Join(dir, "job.yaml")
	src := fmt.Sprintf("version: 1\nname: small\ninputs: [%s]\ncolumns: [row_id, label, dense_0]\nbatch: {size: 250, last: drop}\n"+
		"ring: {slots: 4}\ndecode: {max_unit_rows: 1000%s}\nshuffle: {buffer: 1000000}\n", data, inflight)
	if err := os.WriteFile(specPath, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"plan", "-json", "-gpus", "1", "-samples-per-gpu", "1000", "-measure-cores", "1",
		"-seconds", "0.3", "-warmup", "0.1", "-loads", "0.5", "-python=false", "-svg", "", "-shm-dir", dir, specPath}, &stdout, &stderr); code != 0 {
		t.Fatalf("plan exited %d: %s", code, stderr.String())
	}
	var out planOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	job, err := readJob(context.Background(), specPath)
	if err != nil {
		t.Fatal(err)
	}
	// The job at the predicted size, as lastmiled runs it: with -workers
	// (decode tokens) the predicted cores, a spec without decode.workers
	// gets twice as many workers (daemon/submit.go, docs/daemon.md), and
	// decode.inflight 0 means 2 per worker.
	job.Decode.Workers = 2 * out.Prediction.CoresPerHost
	fp, err := engine.EstimateFootprint(context.Background(), job, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out.Prediction.MemoryBytes, fp.Bytes(); got < want {
		t.Errorf("plan says %d bytes of memory; the daemon charges this job %d at %d workers (shuffle %d, %d units in flight of %d)",
			got, want, job.Decode.Workers, fp.ShuffleBytes, fp.InFlight, fp.UnitBytes)
	}
}

// TestPlanPeerExtrapolation: without -peers-config a peer's rate is
// the local curve at -peer-cores cores. The answer cautions when the
// host's cores go beyond the measured points, but a peer of 16 cores
// from a curve measured up to 4 was stated as fact.
func TestPlanPeerExtrapolation(t *testing.T) {
	m := plan.Measured{Curve: plan.Curve{PerCore: 10000, Ceiling: 1e7}, BatchSize: 1000, BytesPerSample: 1000, ReceiveCPUPerByte: 0.5e-9}
	res := plan.Resources{HostCores: 4, PeerCores: 16}
	tg := plan.Target{GPUs: 8, SamplesPerGPU: 20000}
	p, err := plan.Predict(tg, m, res)
	if err != nil || p.Peers == 0 {
		t.Fatalf("%+v, %v: want peers", p, err)
	}
	got := planAnswer("ctr", planOutput{Target: tg, Resources: res, Prediction: p,
		Measured: &bench.PlanReport{Measured: m, Points: []bench.PlanPoint{{Cores: 1}, {Cores: 2}, {Cores: 4}}}})
	if !strings.Contains(got, "extrapolated") || !strings.Contains(got, "16") {
		t.Errorf("answer %q: want a caution that a 16-core peer's rate is extrapolated from points up to 4 cores", got)
	}
	// A measured peer of as many cores as it has is no extrapolation.
	got = planAnswer("ctr", planOutput{Target: tg, Resources: res, Prediction: p, Peer: &bench.PeerMeasure{Workers: 16},
		Measured: &bench.PlanReport{Measured: m, Points: []bench.PlanPoint{{Cores: 1}, {Cores: 2}, {Cores: 4}}}})
	if strings.Contains(got, "extrapolated") {
		t.Errorf("answer %q: a peer measured with its 16 cores is not extrapolated", got)
	}
}

// TestPlanRateNotBoundByCPU: the curve is a rate per core, and the
// cores are the target over it; but a point where the process used a
// quarter of its quota (testdata/small: 1 core, CPU GOT 0.26) measured
// something other than the CPU (epoch and unit boundaries, waits, or the
// host's other work), and the answer said nothing of it.
func TestPlanRateNotBoundByCPU(t *testing.T) {
	m := plan.Measured{Curve: plan.Curve{PerCore: 10000, Ceiling: 1e7}, BatchSize: 1000, BytesPerSample: 1000}
	res := plan.Resources{HostCores: 4}
	tg := plan.Target{GPUs: 2, SamplesPerGPU: 10000}
	p, err := plan.Predict(tg, m, res)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cpu  float64 // CPU seconds over a 4 s window at 1 core
		warn bool
	}{{1.04, true}, {3.9, false}} {
		got := planAnswer("ctr", planOutput{Target: tg, Resources: res, Prediction: p,
			Measured: &bench.PlanReport{Measured: m, Points: []bench.PlanPoint{{Cores: 1, Window: bench.Window{Seconds: 4}, CPUSeconds: tc.cpu}}}})
		if warned := strings.Contains(got, "used only"); warned != tc.warn {
			t.Errorf("CPU got %.2f of 1 core: answer %q; want a caution %v", tc.cpu/4, got, tc.warn)
		}
	}
}

// TestPlanOutputFilesCheckedFirst: -svg or -html in a directory that
// does not exist failed only when the files were written, after every
// measurement (minutes at the defaults, more with -validate), and the
// report was lost with them.
func TestPlanOutputFilesCheckedFirst(t *testing.T) {
	job, err := readJob(context.Background(), "../../examples/tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "no-such-dir")
	for _, args := range [][]string{
		{"-samples-per-gpu", "100", "-svg", filepath.Join(missing, "plan.svg")},
		{"-samples-per-gpu", "100", "-svg", "", "-html", filepath.Join(missing, "plan.html")},
	} {
		f, _, err := parsePlanFlags(append(args, "job.yaml"), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.setup(job); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), args[len(args)-1]) {
			t.Errorf("%v: setup gave %v, want a usage error naming %s", args, err, args[len(args)-1])
		}
	}
}

// TestPlanTooFewUnits: the window is stretched to 16 units, at most
// to 4× -seconds; when even that holds fewer (big units, a slow
// pipeline), the rate is mostly where the unit boundaries fell, and the
// answer said nothing of it.
func TestPlanTooFewUnits(t *testing.T) {
	m := plan.Measured{Curve: plan.Curve{PerCore: 10000, Ceiling: 1e7}, BatchSize: 1000, BytesPerSample: 1000}
	res := plan.Resources{HostCores: 4}
	tg := plan.Target{GPUs: 1, SamplesPerGPU: 5000}
	p, err := plan.Predict(tg, m, res)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		units int64
		warn  bool
	}{{3, true}, {16, false}} {
		got := planAnswer("ctr", planOutput{Target: tg, Resources: res, Prediction: p,
			Measured: &bench.PlanReport{Measured: m, Points: []bench.PlanPoint{{Cores: 1, Units: tc.units, Window: bench.Window{Seconds: 12}, CPUSeconds: 12}}}})
		if warned := strings.Contains(got, "units"); warned != tc.warn {
			t.Errorf("%d units in the window: answer %q; want a caution %v", tc.units, got, tc.warn)
		}
	}
}
