package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/bench"
	"github.com/lastmile/lastmile/peer"
	"github.com/lastmile/lastmile/plan"
	"github.com/lastmile/lastmile/roots"
)

// TestPlanEndToEnd plans a small job on testdata/small: it measures, fits,
// predicts, validates, and writes the JSON, the plot and the HTML report.
func TestPlanEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for a few seconds")
	}
	dir := t.TempDir()
	data, _ := filepath.Abs("../../testdata/small")
	specPath := filepath.Join(dir, "job.yaml")
	src := fmt.Sprintf("version: 1\nname: small\ninputs: [%s]\ncolumns: [row_id, label, dense_0]\nbatch: {size: 250, last: drop}\n"+
		"ring: {slots: 4}\ndecode: {max_unit_rows: 1000}\npipeline:\n  - filter: \"label == 1 or dense_0 > 0\"\n", data)
	if err := os.WriteFile(specPath, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	svg, page := filepath.Join(dir, "plan.svg"), filepath.Join(dir, "plan.html")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"plan", "-json", "-gpus", "2", "-samples-per-gpu", "2000", "-measure-cores", "1",
		"-seconds", "0.3", "-warmup", "0.2", "-loads", "0.5", "-python-batches", "20", "-validate", "-shm-dir", dir, "-svg", svg, "-html", page, specPath}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("plan exited %d: %s", code, stderr.String())
	}
	var out planOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("plan -json: %v\n%s", err, stdout.String())
	}
	m := out.Measured
	if len(m.Points) != 1 || m.Points[0].Rate <= 0 || m.Measured.Curve.PerCore <= 0 || m.Measured.BytesPerSample <= 0 || m.Measured.UnitBytes <= 0 {
		t.Errorf("measured %+v", m)
	}
	torch := exec.Command(pythonPath(), "-c", "import torch").Run() == nil
	if torch && (m.Client != "python" || m.Measured.ClientPerBatch <= 0) {
		t.Errorf("client %q, %g s per batch: want the Python client's cost (stderr: %s)", m.Client, m.Measured.ClientPerBatch, stderr.String())
	}
	p := out.Prediction
	if p.HostRate != 4000 || p.CoresPerHost < 1 || p.Binding == "" || p.MemoryBytes <= 0 {
		t.Errorf("prediction %+v", p)
	}
	if v := out.Validation; v == nil || v.Capacity.Rate <= 0 || v.AtTarget.Rate <= 0 || v.PredictedCapacity <= 0 {
		t.Errorf("validation %+v", out.Validation)
	}
	if len(m.Stall) != 1 || m.Stall[0].Load != 0.5 {
		t.Errorf("stall against load %+v, want one point at 50%%", m.Stall)
	}
	if !strings.HasPrefix(out.Answer, "To feed 2 GPUs at 2,000 samples/s each") {
		t.Errorf("answer %q", out.Answer)
	}
	var text bytes.Buffer
	writePlan(&text, out)
	for _, section := range []string{"\nPrediction\n", "\nMeasured on this host", "\nSimulated trainers against load", "\nValidation at ", "cores per GPU"} {
		if !strings.Contains(text.String(), section) {
			t.Errorf("the table lacks %q:\n%s", section, text.String())
		}
	}
	if !strings.HasPrefix(text.String(), "To feed 2 GPUs") {
		t.Errorf("the answer does not come first:\n%s", text.String())
	}
	plot, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	for _, label := range []string{"<svg", "cores (CPU quota of the process)", "samples/s (output rows delivered)", "target 4,000 samples/s",
		"trainer demand (% of measured capacity)", "stall (% of trainer time on an empty ring)"} {
		if !bytes.Contains(plot, []byte(label)) {
			t.Errorf("plot lacks %q", label)
		}
	}
	if h, err := os.ReadFile(page); err != nil || !bytes.Contains(h, []byte("<svg")) || !bytes.Contains(h, []byte("Prediction")) {
		t.Errorf("HTML report: %v, %d bytes", err, len(h))
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "lastmile-plan-*")); len(left) > 0 {
		t.Errorf("rings left behind: %v", left)
	}
}

// TestPlanPeer measures a CPU peer named in a lastmiled config: its cores
// (asked of it), its samples/s, and this host's CPU to receive, which the
// prediction then uses.
func TestPlanPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for a few seconds")
	}
	dir := t.TempDir()
	data, _ := filepath.Abs("../../testdata/small")
	rts, err := roots.New(map[string]string{"small": data})
	if err != nil {
		t.Fatal(err)
	}
	defer rts.Close()
	srv := peer.NewServer(peer.ServerConfig{Roots: rts, Workers: 2})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Stop()
	conf := filepath.Join(dir, "lastmiled.yaml")
	yaml := fmt.Sprintf("roots: {small: %s}\npeers: {addrs: [%q], insecure: true, credits: 2}\n", data, l.Addr().String())
	specPath := filepath.Join(dir, "job.yaml")
	src := fmt.Sprintf("version: 1\nname: small\ninputs: [%s]\ncolumns: [row_id, label, dense_0]\nbatch: {size: 250, last: drop}\n"+
		"ring: {slots: 4}\ndecode: {max_unit_rows: 1000}\npipeline:\n  - filter: \"label == 1 or dense_0 > 0\"\n", data)
	for path, text := range map[string]string{conf: yaml, specPath: src} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"plan", "-json", "-gpus", "2", "-samples-per-gpu", "2000", "-measure-cores", "1",
		"-seconds", "0.3", "-warmup", "0.2", "-loads", "0.5", "-python=false", "-shm-dir", dir, "-svg", "",
		"-peers-config", conf, specPath}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("plan exited %d: %s", code, stderr.String())
	}
	var out planOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("plan -json: %v\n%s", err, stdout.String())
	}
	pm := out.Peer
	if pm == nil || pm.Addr != l.Addr().String() || pm.Workers != 2 || pm.InFlight != 2 || pm.SamplesPerSec <= 0 ||
		pm.PerCore != pm.SamplesPerSec/2 || pm.ReceiveCPUPerByte <= 0 || pm.Units < 1 || pm.WirePerByte <= 0 || pm.WirePerByte >= 1.1 {
		t.Fatalf("peer measured %+v", pm)
	}
	if out.Resources.PeerCores != 2 {
		t.Errorf("peer cores %d, want the peer's 2 workers", out.Resources.PeerCores)
	}
	if srv.Stats().Units.Load() < int64(pm.Units) {
		t.Errorf("the peer served %d units, the plan counted %d", srv.Stats().Units.Load(), pm.Units)
	}
	var text bytes.Buffer
	writePlan(&text, out)
	if !strings.Contains(text.String(), "peer measured") {
		t.Errorf("the table lacks the measured peer:\n%s", text.String())
	}
	// A config without peers is refused, saying so.
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("roots: {small: %s}\n", data)), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"plan", "-samples-per-gpu", "2000", "-measure-cores", "1", "-seconds", "0.3",
		"-python=false", "-shm-dir", dir, "-svg", "", "-peers-config", conf, specPath}, io.Discard, &stderr); code == 0 ||
		!strings.Contains(stderr.String(), "lists no peers") {
		t.Errorf("a config without peers: exit %d, %s", code, stderr.String())
	}
}

// TestPlanUsage: a target is required, and only one kind of it.
func TestPlanUsage(t *testing.T) {
	for _, args := range [][]string{
		{"plan", "../../examples/tiny.yaml"},
		{"plan", "-samples-per-gpu", "1", "-step-ms", "10", "../../examples/tiny.yaml"},
		{"plan", "-samples-per-gpu", "1", "-loads", "0,x", "../../examples/tiny.yaml"},
		{"plan", "-samples-per-gpu", "1", "-dist", "zipf", "../../examples/tiny.yaml"},
		{"plan", "-samples-per-gpu", "1"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage): %s", args, code, stderr.String())
		}
	}
}

// TestPlanAnswer: the answer in words for each kind of prediction.
func TestPlanAnswer(t *testing.T) {
	m := plan.Measured{Curve: plan.Curve{PerCore: 10000, Ceiling: 1e6}, DecodeShare: 0.7, PackPerBatch: 0.001, BatchSize: 1000,
		BytesPerSample: 1000, UnitBytes: 1 << 20, RingBytesPerGPU: 8 << 20, ReceiveCPUPerByte: 0.5e-9}
	for _, tc := range []struct {
		target plan.Target
		res    plan.Resources
		want   []string
	}{
		{plan.Target{GPUs: 8, SamplesPerGPU: 2500}, plan.Resources{HostCores: 4},
			[]string{"needs 2 cores per host (0.25 per GPU)", "without peers", "The binding resource is decode CPU (50% of the host's 4 cores",
				"Caution: that is more cores than were measured (1)"}},
		{plan.Target{GPUs: 8, SamplesPerGPU: 20000}, plan.Resources{HostCores: 4, PeerCores: 8},
			[]string{"needs all 4 of the host's cores plus 2 CPU peers of 8 cores", "the peers take the rest"}},
		{plan.Target{GPUs: 8, SamplesPerGPU: 20000}, plan.Resources{HostCores: 4},
			[]string{"cannot be fed on this host", "configure CPU peers", "25% of the target"}},
	} {
		p, err := plan.Predict(tc.target, m, tc.res)
		if err != nil {
			t.Fatal(err)
		}
		got := planAnswer("ctr", planOutput{Target: tc.target, Resources: tc.res, Prediction: p,
			Measured: &bench.PlanReport{Measured: m, Points: []bench.PlanPoint{{Cores: 1}}}})
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("answer %q lacks %q", got, w)
			}
		}
	}
}

// TestPrintJobAdvice: lastmile status JOB prints the daemon's advice.
func TestPrintJobAdvice(t *testing.T) {
	raw := []byte(`{"id":"x","advice":{"window_seconds":300,"stall":[0,0.12],"worst_rank":1,"cores":3.5,"headroom":0.1,
		"more_cores":1,"peers":0,"advice":"rank 1 waited 12% of the last 5m0s: about 1 more core"}}`)
	var out bytes.Buffer
	if err := printJobAdvice(&out, raw); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"advice         rank 1 waited 12% of the last 5m0s: about 1 more core", "0: 0.0%, 1: 12.0%", "3.50 cores used"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("status lacks %q:\n%s", w, out.String())
		}
	}
	out.Reset()
	if err := printJobAdvice(&out, []byte(`{"id":"x"}`)); err != nil || out.Len() != 0 {
		t.Errorf("without advice: %q, %v", out.String(), err)
	}
}
