package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/bench"
	"github.com/lastmile/lastmile/cpus"
	"github.com/lastmile/lastmile/plan"
)

// TestPlanSetupRefusesBadFlags: a flag value that cannot be meant is
// refused as a usage error before anything is measured, instead of being
// replaced by a default (or ignored) without a word.
func TestPlanSetupRefusesBadFlags(t *testing.T) {
	job, err := readJob(context.Background(), "../../examples/tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	more := strconv.Itoa(cpus.Available() + 1)
	for _, args := range [][]string{
		{"-gpus", "-1", "-samples-per-gpu", "100"},
		{"-host-cores", "-1", "-samples-per-gpu", "100"},
		{"-peer-cores", "-4", "-samples-per-gpu", "100"},
		{"-samples-per-gpu", "-5", "-step-ms", "100"}, // the negative one was ignored, -step-ms used
		{"-samples-per-gpu", "100", "-step-ms", "-5"},
		{"-samples-per-gpu", "Inf"}, // measured for minutes, then -json failed: unsupported value: +Inf
		{"-samples-per-gpu", "NaN"},
		{"-step-ms", "1e-320"},                            // 500 samples / 1e-323 s = +Inf
		{"-samples-per-gpu", "100", "-network-gbps", "0"}, // was taken as 10 Gbit/s
		{"-samples-per-gpu", "100", "-network-gbps", "-1"},
		{"-samples-per-gpu", "100", "-receive-cpu", "-1"}, // fewer peers, negative receive cores
		{"-samples-per-gpu", "100", "-peer-rate", "-1"},
		{"-samples-per-gpu", "100", "-seconds", "0"}, // was measured for 3 s
		{"-samples-per-gpu", "100", "-seconds", "-1"},
		{"-samples-per-gpu", "100", "-warmup", "-1"},
		{"-samples-per-gpu", "100", "-repeats", "0"},
		{"-samples-per-gpu", "100", "-python-batches", "0"},
		{"-samples-per-gpu", "100", "-measure-cores", "-1"},
		{"-samples-per-gpu", "100", "-measure-cores", more},   // points this host cannot give
		{"-samples-per-gpu", "100", "-cores", "1"},            // without -validate: ignored
		{"-samples-per-gpu", "100", "-validate-seconds", "1"}, // without -validate: ignored
		{"-samples-per-gpu", "100", "-validate", "-cores", "-1"},
		{"-samples-per-gpu", "100", "-validate", "-cores", more},
		{"-samples-per-gpu", "100", "-validate", "-validate-seconds", "-1"},
	} {
		f, _, err := parsePlanFlags(append(args, "job.yaml"), io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if _, err := f.setup(job); !errors.Is(err, errUsage) {
			t.Errorf("%v: setup gave %v, want a usage error", args, err)
		}
	}
	// What must still be accepted: 0 for the defaults, and -warmup 0.
	for _, args := range [][]string{
		{"-samples-per-gpu", "100"},
		{"-step-ms", "100", "-gpus", "0", "-host-cores", "0", "-peer-cores", "0", "-measure-cores", "0"},
		{"-samples-per-gpu", "100", "-warmup", "0", "-receive-cpu", "0"},
		{"-samples-per-gpu", "100", "-validate", "-cores", "1", "-validate-seconds", "1"},
	} {
		f, _, err := parsePlanFlags(append(args, "job.yaml"), io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if _, err := f.setup(job); err != nil {
			t.Errorf("%v: setup gave %v, want none", args, err)
		}
	}
}

// TestPlanWarmupZero: -warmup 0 means no warm-up, not the default 1 s
// (bench.PlanConfig takes 0 as "the default").
func TestPlanWarmupZero(t *testing.T) {
	job, err := readJob(context.Background(), "../../examples/tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := parsePlanFlags([]string{"-samples-per-gpu", "100", "-warmup", "0", "job.yaml"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.setup(job)
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.config(job, s, nil, nil)
	if d := time.Duration(cfg.Warmup * float64(time.Second)); cfg.Warmup <= 0 || d > time.Microsecond {
		t.Errorf("-warmup 0 gives PlanConfig.Warmup %g (%v of warm-up after the defaults): want none", cfg.Warmup, d)
	}
}

// TestPlanNoBatches: a spec whose pipeline drops every row, or whose
// inputs hold no rows, never gives a batch; plan must say so and stop,
// not wait for the first batch for ever (the job runs epochs without end).
// Before the fix the first hung until the context ended, and the second
// spun a core at 100% and did not even stop on the context (SIGTERM).
func TestPlanNoBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("measures")
	}
	dir := t.TempDir()
	data, _ := filepath.Abs("../../testdata/small")
	empty := filepath.Join(dir, "empty")
	var out bytes.Buffer
	if code := run(context.Background(), []string{"gen", "-rows", "0", empty}, &out, &out); code != 0 {
		t.Fatalf("gen -rows 0: %d %s", code, out.String())
	}
	// What the error must say: the engine's refusal of endless epochs
	// over nothing (every row group pruned, or no rows), which comes
	// before the plan's own check ("no batch").
	want := map[string]string{"drops every row": "nothing to read", "no rows": "nothing to read"}
	for name, src := range map[string]string{
		"drops every row": fmt.Sprintf("version: 1\nname: dropall\ninputs: [%s]\ncolumns: [row_id, label, dense_0]\nbatch: {size: 250, last: drop}\n"+
			"ring: {slots: 4}\ndecode: {max_unit_rows: 1000}\npipeline:\n  - filter: \"label == 7\"\n", data),
		"no rows": fmt.Sprintf("version: 1\nname: empty\ninputs: [%s]\ncolumns: [label, dense_0]\nbatch: {size: 250, last: drop}\nring: {slots: 4}\n", empty),
	} {
		t.Run(name, func(t *testing.T) {
			specPath := filepath.Join(dir, "job.yaml")
			if err := os.WriteFile(specPath, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			done := make(chan int, 1)
			var stderr bytes.Buffer
			t0 := time.Now()
			go func() {
				done <- run(ctx, []string{"plan", "-gpus", "1", "-samples-per-gpu", "1000", "-measure-cores", "1", "-seconds", "0.3",
					"-warmup", "0.1", "-loads", "0.5", "-python=false", "-svg", "", "-shm-dir", dir, specPath}, io.Discard, &stderr)
			}()
			select {
			case code := <-done:
				if code == 0 || time.Since(t0) > 15*time.Second || !strings.Contains(stderr.String(), want[name]) {
					t.Errorf("exit %d after %v: %s; want a prompt error saying %q", code, time.Since(t0), stderr.String(), want[name])
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("plan still running 10 s after its context ended (it ignores cancellation): %s", stderr.String())
			}
		})
	}
}

// TestPlanMeasuredPeerRate: a measured peer delivered SamplesPerSec with
// its Workers cores; a peer of as many cores must be credited that rate.
// The per-core figure (SamplesPerSec/Workers) already carries whatever
// did not scale on the peer: putting it through the host's Amdahl curve
// again counted the serial share twice and asked for too many peers.
func TestPlanMeasuredPeerRate(t *testing.T) {
	pm := &bench.PeerMeasure{Workers: 8, SamplesPerSec: 80000, PerCore: 10000, ReceiveCPUPerByte: 0.5e-9, WirePerByte: 1}
	m := plan.Measured{Curve: plan.Curve{PerCore: 10000, Serial: 0.1, Ceiling: 1e7}, BatchSize: 1000, BytesPerSample: 1000}
	for _, peerCores := range []int{0, 8} { // 0: the measured peer's workers
		f := &planFlags{peerCores: peerCores, recvGB: 1.5}
		mm, res := peerFigures(m, plan.Resources{HostCores: 4, PeerCores: f.peerCores}, f, pm)
		tg := plan.Target{GPUs: 8, SamplesPerGPU: 60000} // 480k samples/s; 4 host cores give 4·10k/1.3 ≈ 30.8k
		p, err := plan.Predict(tg, mm, res)
		if err != nil {
			t.Fatal(err)
		}
		want := int(math.Ceil(p.PeerRate / pm.SamplesPerSec))
		if p.Peers != want {
			t.Errorf("-peer-cores %d: %d peers for %.0f samples/s from peers measured at %.0f each: want %d", peerCores, p.Peers, p.PeerRate, pm.SamplesPerSec, want)
		}
		if mm.ReceiveCPUPerByte != pm.ReceiveCPUPerByte || mm.WirePerByte != pm.WirePerByte || res.PeerCores != 8 {
			t.Errorf("figures %+v, %+v: want the measured peer's", mm, res)
		}
	}
}

// TestPlanValidateCores: -validate runs at the predicted size only where
// this host has the cores; a prediction for a bigger GPU host (-host-cores
// above this host's) is validated at this host's cores, against the
// curve's rate there, not at a quota the machine cannot give.
func TestPlanValidateCores(t *testing.T) {
	n := cpus.Available()
	for _, tc := range []struct {
		cores, predicted, hostCores, want int
	}{
		{0, 1, n, 1},
		{0, 0, n, 1},
		{0, n + 3, n + 8, n}, // -host-cores above this host's
		{1, n + 3, n + 8, 1}, // -cores says
	} {
		out := planOutput{Prediction: plan.Prediction{CoresPerHost: tc.predicted}, Resources: plan.Resources{HostCores: tc.hostCores}}
		if got := validateCores(planFlags{cores: tc.cores}, out); got != tc.want {
			t.Errorf("%+v: validates at %d cores, want %d (this host has %d)", tc, got, tc.want, n)
		}
	}
}
