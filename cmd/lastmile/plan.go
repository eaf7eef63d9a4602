package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lastmile/lastmile/bench"
	"github.com/lastmile/lastmile/cpus"
	"github.com/lastmile/lastmile/plan"
	"github.com/lastmile/lastmile/spec"
)

const planUsage = `usage: lastmile plan [flags] SPEC

Answers "how many cores and peers does this pipeline need per GPU?" by
measurement. On the spec's own inputs, in this process, for a bounded time
each (-seconds), it measures the pipeline's samples/s with 1, 2, ...
-measure-cores cores (the process confined by a cgroup CPU quota, or
CPU affinity where there is none), the serial stage's cost per batch
(packing and ring handoff), the trainer client's cost per batch, decode's
share of the CPU and the memory per unit in flight, and the stall of
simulated trainers against their demand (-loads). Then it predicts, for
the target (-samples-per-gpu, or -step-ms with the spec's batch size, times
-gpus): cores per GPU and per host, CPU peers and their network bytes/s
when the host's cores do not suffice (-peer-cores), memory, the expected
stall and the binding resource; and with -validate it runs the job at the
predicted size against trainers taking the target rate and reports what
it measured beside the prediction.

Rates are a first epoch's: the job runs without its unit cache, so every
unit is decoded; a cache makes later epochs faster than planned.

Flags:
`

// planFlags are plan's flags.
type planFlags struct {
	gpus                   int
	perGPU, stepMS         float64
	hostCores, measure     int
	seconds, warmup        float64
	repeats                int
	loads, dist            string
	peerCores              int
	peerRate, recvGB, gbps float64
	peersConfig            string
	validate, python       bool
	pyBatches              int
	cores                  int
	valSeconds             float64
	asJSON                 bool
	svg, html              string
	shmDir                 *string
}

func addPlanFlags(fs interface {
	IntVar(*int, string, int, string)
	Float64Var(*float64, string, float64, string)
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
}, f *planFlags) {
	fs.IntVar(&f.gpus, "gpus", 0, "GPUs (trainer ranks) per host (default the spec's world_size)")
	fs.Float64Var(&f.perGPU, "samples-per-gpu", 0, "target: samples/s each GPU's trainer takes")
	fs.Float64Var(&f.stepMS, "step-ms", 0, "target as a training step in ms, with the spec's batch size (instead of -samples-per-gpu)")
	fs.IntVar(&f.hostCores, "host-cores", 0, "cores of a GPU host lastmile may use (default this host's available CPUs)")
	fs.IntVar(&f.measure, "measure-cores", 0, "measure the scaling curve with 1 to this many cores (default this host's available CPUs)")
	fs.Float64Var(&f.seconds, "seconds", 3, "seconds of each measurement, after the warm-up")
	fs.IntVar(&f.repeats, "repeats", 1, "measure each point of the curve, and a validation's capacity, this many times; the fastest counts")
	fs.Float64Var(&f.warmup, "warmup", 1, "seconds of warm-up before each measurement, from the first batch")
	fs.StringVar(&f.loads, "loads", "0.5,0.9,1.1", "trainer demands for the stall curve, as shares of the measured capacity")
	fs.StringVar(&f.dist, "dist", "fixed", "simulated trainers' step times: fixed, exp or uniform (around the mean)")
	fs.IntVar(&f.peerCores, "peer-cores", 0, "cores of one CPU peer; 0: no peers configured (or, with -peers-config, the measured peer's)")
	fs.StringVar(&f.peersConfig, "peers-config", "", "a lastmiled config `file` whose peers and roots sections reach CPU peers: the first peer is measured on the spec's units (its samples/s per core, this host's CPU to receive its output) in place of -peer-rate and -receive-cpu")
	fs.Float64Var(&f.peerRate, "peer-rate", 0, "samples/s of one peer core (default a local core's: a peer runs the same code)")
	fs.Float64Var(&f.recvGB, "receive-cpu", 1.5, "this host's CPU seconds to receive a GB of a peer's output (default: lastmile bench -only spill on a 2-vCPU VM, docs/peers.md; -peers-config measures it)")
	fs.Float64Var(&f.gbps, "network-gbps", 10, "the host's network for peer traffic, Gbit/s")
	fs.BoolVar(&f.python, "python", true, "measure the Python trainer client's cost per batch ($LASTMILE_PYTHON or /usr/bin/python3, with torch); false: the Go consumer's")
	fs.IntVar(&f.pyBatches, "python-batches", 200, "batches the Python client takes for its cost (the first ones cost more: torch warms up)")
	fs.BoolVar(&f.validate, "validate", false, "run the job at the predicted size and report what it does beside the prediction")
	fs.IntVar(&f.cores, "cores", 0, "with -validate: the size to validate, in cores (default the predicted cores per host)")
	fs.Float64Var(&f.valSeconds, "validate-seconds", 0, "with -validate: seconds of each validation run (default -seconds)")
	fs.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	fs.StringVar(&f.svg, "svg", "plan.svg", "write the plot (throughput against cores, stall against load) to this SVG `file`; \"\" for none")
	fs.StringVar(&f.html, "html", "", "also write one self-contained HTML report to this `file`")
}

// planOutput is plan's report, as --json prints it.
type planOutput struct {
	Answer     string             `json:"answer"`
	Target     plan.Target        `json:"target"`
	Resources  plan.Resources     `json:"resources"`
	Measured   *bench.PlanReport  `json:"measured"`
	Prediction plan.Prediction    `json:"prediction"`
	Validation *bench.Validation  `json:"validation,omitempty"`
	Peer       *bench.PeerMeasure `json:"peer,omitempty"` // -peers-config
	Plot       string             `json:"plot,omitempty"`
}

func runPlan(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, specPath, err := parsePlanFlags(args, stderr)
	if err != nil {
		return err
	}
	job, err := readJob(ctx, specPath)
	if err != nil {
		return err
	}
	s, err := f.setup(job)
	if err != nil {
		return err
	}
	var peers *peerSetup
	if f.peersConfig != "" {
		if peers, err = openPeers(ctx, f.peersConfig); err != nil {
			return fmt.Errorf("-peers-config: %w", err)
		}
		defer peers.Close()
	}
	bar := newProgressBar(stderr, time.Duration((f.seconds+f.warmup+0.5)*float64(time.Second)))
	defer bar.Done()
	limit, err := bench.NewCPULimit()
	if err != nil {
		return err
	}
	defer limit.Close()
	cfg := f.config(job, s, bar.Step, limit)
	out, err := measurePlan(ctx, cfg, f, s, peers, specPath, stderr)
	if err != nil {
		return err
	}
	if f.validate {
		if out.Validation, err = validatePlan(ctx, cfg, *f, out); err != nil {
			return fmt.Errorf("validate: %w", err)
		}
	}
	bar.Done()
	out.Answer = planAnswer(job.Name, out)
	if err := writePlanFiles(&out, *f); err != nil {
		return err
	}
	if f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	writePlan(stdout, out)
	return nil
}

// parsePlanFlags parses plan's flags and returns them with the path of
// the job spec, its one argument.
func parsePlanFlags(args []string, stderr io.Writer) (*planFlags, string, error) {
	fs := newFlags("plan", stderr)
	var f planFlags
	addPlanFlags(fs, &f)
	f.shmDir = shmDirFlag(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, planUsage)
		printFlags(fs, "dir")
	}
	if err := parseArgs(fs, args); err != nil {
		return nil, "", err
	}
	if fs.NArg() != 1 {
		return nil, "", fmt.Errorf("%w: want one job spec file, got %d arguments", errUsage, fs.NArg())
	}
	return &f, fs.Arg(0), nil
}

// planSetup is what plan reads from its flags and the spec before it
// measures anything.
type planSetup struct {
	target plan.Target
	loads  []float64
	dist   string
	res    plan.Resources
}

// setup checks the flags against job, whose world size is the default
// -gpus, so that a bad flag is refused before minutes of measuring.
func (f *planFlags) setup(job *spec.Job) (planSetup, error) {
	var s planSetup
	if err := f.check(); err != nil {
		return s, err
	}
	if f.gpus == 0 {
		f.gpus = job.WorldSize
	}
	var err error
	if s.target, err = f.target(job.Batch.Size); err != nil {
		return s, err
	}
	if s.loads, err = parseLoads(f.loads); err != nil {
		return s, err
	}
	if s.dist, err = bench.ParseDist(f.dist); err != nil {
		return s, fmt.Errorf("%w: -dist: %v", errUsage, err)
	}
	// The files are written after every measurement: a directory that
	// is not there would lose them all.
	for _, o := range []struct{ flag, path string }{{"-svg", f.svg}, {"-html", f.html}} {
		if o.path == "" {
			continue
		}
		if st, err := os.Stat(filepath.Dir(o.path)); err != nil || !st.IsDir() {
			return s, fmt.Errorf("%w: %s %s: its directory is not there", errUsage, o.flag, o.path)
		}
	}
	// lastmiled gives a job without decode.workers 2 workers per decode
	// token (a core), and the engine 2 units in flight per worker: the
	// memory it charges counts 4 units per core.
	s.res = plan.Resources{HostCores: f.hostCores, PeerCores: f.peerCores, NetworkBytesPerSec: f.gbps * 1e9 / 8, InFlightPerCore: 4}
	if s.res.HostCores <= 0 {
		s.res.HostCores = cpus.Available()
	}
	return s, nil
}

// measurePlan measures the pipeline (and the Python client, and a peer
// when peers is not nil) and predicts what the target needs from it.
func measurePlan(ctx context.Context, cfg bench.PlanConfig, f *planFlags, s planSetup, peers *peerSetup, specPath string, stderr io.Writer) (planOutput, error) {
	rep, err := bench.MeasurePlan(ctx, cfg)
	if err != nil {
		return planOutput{}, err
	}
	if f.python {
		cfg.Progress(1, 1, "the Python client's cost per batch")
		if c, err := bench.PythonClient(ctx, cfg, pythonPath(), pythonDir(), max(f.pyBatches, 1)); err != nil {
			fmt.Fprintf(stderr, "lastmile plan: the Python client's cost was not measured (%v); the Go consumer's is used\n", err)
		} else {
			rep.Measured.ClientPerBatch, rep.Client = c, "python"
		}
	}
	var pm *bench.PeerMeasure
	if peers != nil {
		cfg.Progress(1, 1, "a CPU peer's rate and the cost of receiving from it")
		if pm, err = peers.measure(ctx, cfg, specPath); err != nil {
			return planOutput{}, fmt.Errorf("measure a peer (-peers-config %s): %w", f.peersConfig, err)
		}
	}
	m, res := peerFigures(rep.Measured, s.res, f, pm)
	rep.Measured = m // the JSON's measured figures are those the prediction used
	pred, err := plan.Predict(s.target, m, res)
	if err != nil {
		return planOutput{}, err
	}
	// The arena's chunks follow the units in flight at the predicted
	// size, as lastmiled charges the job run there.
	if a := rep.ArenaBytes(s.target.GPUs, pred.UnitsInFlight); a != m.ArenaBytes {
		m.ArenaBytes, rep.Measured.ArenaBytes = a, a
		if pred, err = plan.Predict(s.target, m, res); err != nil {
			return planOutput{}, err
		}
	}
	return planOutput{Target: s.target, Resources: res, Measured: rep, Prediction: pred, Peer: pm}, nil
}

// target reads the target flags.
func (f *planFlags) target(batch int) (plan.Target, error) {
	for _, v := range []struct {
		name string
		v    float64
	}{{"-samples-per-gpu", f.perGPU}, {"-step-ms", f.stepMS}} {
		if v.v < 0 || math.IsNaN(v.v) || math.IsInf(v.v, 0) {
			return plan.Target{}, fmt.Errorf("%w: %s %g: want a positive, finite number", errUsage, v.name, v.v)
		}
	}
	switch {
	case f.perGPU > 0 && f.stepMS > 0:
		return plan.Target{}, fmt.Errorf("%w: give -samples-per-gpu or -step-ms, not both", errUsage)
	case f.perGPU > 0:
		t := plan.Target{GPUs: f.gpus, SamplesPerGPU: f.perGPU}
		if math.IsInf(t.HostRate(), 0) {
			return t, fmt.Errorf("%w: -samples-per-gpu %g times %d GPUs is %g samples/s: not a rate", errUsage, f.perGPU, f.gpus, t.HostRate())
		}
		return t, nil
	case f.stepMS > 0:
		t, err := plan.TargetFromStep(f.gpus, f.stepMS/1000, batch)
		if err != nil {
			return t, fmt.Errorf("%w: %v", errUsage, err)
		}
		if math.IsInf(t.HostRate(), 0) || !(t.SamplesPerGPU > 0) {
			return t, fmt.Errorf("%w: -step-ms %g with batches of %d: %g samples/s per GPU, %g in all over %d GPUs, is not a rate", errUsage, f.stepMS, batch, t.SamplesPerGPU, t.HostRate(), f.gpus)
		}
		return t, nil
	}
	return plan.Target{}, fmt.Errorf("%w: say what the trainers take: -samples-per-gpu N, or -step-ms MS (with the spec's batch size)", errUsage)
}

func parseLoads(s string) ([]float64, error) {
	var out []float64
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || v <= 0 || v > 10 {
			return nil, fmt.Errorf("%w: -loads: %q is not a share of capacity in (0, 10]", errUsage, p)
		}
		out = append(out, v)
	}
	return out, nil
}

// writePlanFiles writes the plot and the HTML report.
func writePlanFiles(out *planOutput, f planFlags) error {
	if f.svg == "" && f.html == "" {
		return nil
	}
	svg := planSVG(*out)
	if f.svg != "" {
		if err := os.WriteFile(f.svg, []byte(svg), 0o644); err != nil {
			return fmt.Errorf("write the plot: %w", err)
		}
		out.Plot = f.svg
	}
	if f.html != "" {
		js, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return err
		}
		var text strings.Builder
		writePlan(&text, *out)
		if err := os.WriteFile(f.html, []byte(planHTML(out.Answer, text.String(), svg, string(js))), 0o644); err != nil {
			return fmt.Errorf("write the HTML report: %w", err)
		}
	}
	return nil
}

// validateCores is the size -validate runs at: -cores, or the predicted
// cores per host, at most the host's and at most what this machine has
// (a quota above its CPUs gives it no more than its CPUs).
func validateCores(f planFlags, out planOutput) int {
	if f.cores > 0 {
		return f.cores
	}
	return max(min(out.Prediction.CoresPerHost, out.Resources.HostCores, cpus.Available()), 1)
}

// validatePlan runs the job at the predicted size (or -cores).
func validatePlan(ctx context.Context, cfg bench.PlanConfig, f planFlags, out planOutput) (*bench.Validation, error) {
	cores := validateCores(f, out)
	got := 0.0 // the CPU the process got per core of quota at the curve's first point
	if p := out.Measured.Points[0]; p.Seconds > 0 && p.Cores > 0 {
		got = p.CPUSeconds / p.Seconds / p.Cores
	}
	return bench.Validate(ctx, cfg, out.Measured.Measured.Curve, out.Target, cores, f.valSeconds, got)
}

// peerFigures sets m's peer figures from the flags, or from the measured
// peer pm when there is one, and res's peer cores (the measured peer's
// workers unless -peer-cores says).
func peerFigures(m plan.Measured, res plan.Resources, f *planFlags, pm *bench.PeerMeasure) (plan.Measured, plan.Resources) {
	m.PeerPerCore, m.ReceiveCPUPerByte = f.peerRate, f.recvGB/1e9
	if pm == nil {
		return m, res
	}
	if peerProducedNothing(pm) {
		// A rate per core of 0 would read as a local core's: a peer
		// that produced nothing is not counted (planAnswer says why).
		res.PeerCores = 0
		return m, res
	}
	m.ReceiveCPUPerByte, m.WirePerByte = pm.ReceiveCPUPerByte, pm.WirePerByte
	if res.PeerCores == 0 {
		res.PeerCores = pm.Workers
	}
	// pm.PerCore is the peer's rate with its Workers cores over Workers:
	// what did not scale there is in it already. Predict puts a peer's
	// cores through the curve's serial share (Rate(k) = k·P/(1+s(k−1))),
	// so the per-core rate it is given is the one that curve turns into
	// the measured rate at Workers cores.
	m.PeerPerCore = pm.PerCore
	if w := float64(pm.Workers); w > 1 {
		m.PeerPerCore = pm.PerCore * (1 + m.Curve.Serial*(w-1))
	}
	return m, res
}

// peerProducedNothing reports whether the measured peer returned no
// samples in its window (no units, or only empty ones): it has no rate
// to size peers by.
func peerProducedNothing(pm *bench.PeerMeasure) bool {
	return pm != nil && !(pm.SamplesPerSec > 0 && pm.PerCore > 0)
}

// config is the measurements' configuration from the flags.
func (f *planFlags) config(job *spec.Job, s planSetup, progress func(int, int, string), limit *bench.CPULimit) bench.PlanConfig {
	warmup := f.warmup
	if warmup == 0 {
		warmup = 1e-9 // bench.PlanConfig takes 0 as its default, 1 s: -warmup 0 means none
	}
	return bench.PlanConfig{Job: job, GPUs: f.gpus, MaxCores: f.measure, Seconds: f.seconds, Warmup: warmup, Repeats: f.repeats,
		Loads: s.loads, Dist: s.dist, ShmDir: *f.shmDir, Progress: progress, Limit: limit}
}

// check refuses flag values that cannot be meant, before anything is
// measured: a default stands in only for 0 (or the flag left out).
func (f *planFlags) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
	}
	for _, v := range []struct {
		name string
		v    int
	}{{"-gpus", f.gpus}, {"-host-cores", f.hostCores}, {"-peer-cores", f.peerCores}, {"-measure-cores", f.measure}, {"-cores", f.cores}} {
		if v.v < 0 {
			return bad("%s %d: want 0 (the default) or more", v.name, v.v)
		}
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !(f.seconds > 0) || !finite(f.seconds):
		return bad("-seconds %g: want > 0", f.seconds)
	case !(f.warmup >= 0) || !finite(f.warmup):
		return bad("-warmup %g: want 0 or more", f.warmup)
	case !(f.valSeconds >= 0) || !finite(f.valSeconds):
		return bad("-validate-seconds %g: want 0 (-seconds) or more", f.valSeconds)
	case f.repeats < 1:
		return bad("-repeats %d: want 1 or more", f.repeats)
	case f.pyBatches < 1:
		return bad("-python-batches %d: want 1 or more", f.pyBatches)
	case !(f.gbps > 0) || !finite(f.gbps):
		return bad("-network-gbps %g: want > 0", f.gbps)
	case !(f.recvGB >= 0) || !finite(f.recvGB):
		return bad("-receive-cpu %g: want 0 or more CPU seconds per GB", f.recvGB)
	case !(f.peerRate >= 0) || !finite(f.peerRate):
		return bad("-peer-rate %g: want 0 (a local core's) or more", f.peerRate)
	case f.measure > cpus.Available():
		return bad("-measure-cores %d: this host has %d CPUs; a point with more would measure %d and call it %d", f.measure, cpus.Available(), cpus.Available(), f.measure)
	case !f.validate && (f.cores != 0 || f.valSeconds != 0):
		return bad("-cores and -validate-seconds are for -validate")
	case f.cores > cpus.Available():
		return bad("-cores %d: this host has %d CPUs to validate with", f.cores, cpus.Available())
	}
	return nil
}
