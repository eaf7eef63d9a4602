package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/lastmile/lastmile/cpus"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/ops"
	"github.com/lastmile/lastmile/plan"
	"github.com/lastmile/lastmile/spec"
)

// PlanConfig says what `lastmile plan` measures: the job of a spec, on
// its own inputs, in this process, for a bounded time per measurement.
type PlanConfig struct {
	Job *spec.Job // read and checked; not modified
	// GPUs is the number of trainer ranks to feed (default the spec's
	// world size): the measured job deals its batches to as many rings.
	GPUs int
	// MaxCores is the scaling curve's last point (default
	// cpus.Available()): 1, 2, … MaxCores cores are measured.
	MaxCores int
	// Seconds is each measurement's window (default 3), after Warmup
	// (default 1) from the first batch.
	Seconds, Warmup float64
	// MinUnits stretches a window until that many units were decoded in
	// it (default 16), up to 4·Seconds: output comes a unit at a time,
	// so a window of few units measures the units' boundaries.
	MinUnits int
	// Repeats is how often each point of the curve (and a validation's
	// capacity) is measured; the fastest counts (default 1): other load
	// on the host only slows a run down.
	Repeats int
	// Loads are the trainer demands, as shares of the measured capacity,
	// of the stall-against-load curve (default 0.5, 0.9, 1.1). 0.9 is
	// the check: at 90% of capacity the stall must be ≤ 1%, and
	// where it is not, deeper rings are tried.
	Loads []float64
	Dist  string // trainer step distribution (ParseDist)
	// ShmDir holds the measurement's rings ("" is the default).
	ShmDir string
	// Progress, if not nil, is told each step as it starts.
	Progress func(step, steps int, what string)
	// Limit confines the process to a number of cores; nil makes one.
	Limit *CPULimit
}

// PlanReport is what MeasurePlan measured, and its fit.
type PlanReport struct {
	Spec      string        `json:"spec"`
	GPUs      int           `json:"gpus"`
	BatchSize int           `json:"batch_size"`
	Limit     string        `json:"cpu_limit_method"`
	Points    []PlanPoint   `json:"points"`
	Measured  plan.Measured `json:"measured"`
	// CPUPerSample is the process's CPU per sample at one core, in
	// seconds: the intrinsic cost, load aside.
	CPUPerSample float64 `json:"cpu_s_per_sample"`
	// DecodeAlone is decoding the pipeline's input columns alone at one
	// core, for the decode share.
	DecodeAlone decode.Result `json:"decode_alone"`
	Stall       []StallPoint  `json:"stall_vs_load"`
	// Slots is the spec's ring depth; DepthNeeded the depth at which the
	// stall at 90% of capacity is ≤ 1% (0: not found up to 64).
	Slots       int `json:"slots"`
	DepthNeeded int `json:"depth_needed"`
	// DecodeWorkers is the spec's decode.workers (0: not set). The curve
	// is measured with a worker per core whatever it says.
	DecodeWorkers int `json:"spec_decode_workers,omitempty"`
	// Dist is the simulated trainers' step distribution; Seconds and
	// Warmup each measurement's window and warm-up.
	Dist string `json:"dist"`
	// Client is whose cost per batch Measured.ClientPerBatch is: "go"
	// (the Go consumer, measured with the curve) or "python" (the Python
	// client, PythonClient).
	Client          string  `json:"client"`
	Seconds, Warmup float64 `json:"-"`
	footprint       engine.Footprint
}

// ArenaBytes is the unit arena lastmiled charges the job run with rings
// ranks on a host and inflight units in flight (0: the job makes none,
// ring.arena off or no whole unit).
func (r *PlanReport) ArenaBytes(rings, inflight int) int64 {
	return r.footprint.ArenaFor(rings, inflight)
}

// PlanPoint is one measurement with Cores cores and Workers workers.
type PlanPoint struct {
	Cores   float64 `json:"cores"`
	Workers int     `json:"workers"`
	Window
	Units        int64   `json:"units"` // decoded in the window
	InputRate    float64 `json:"input_rows_per_s"`
	PackPerBatch float64 `json:"pack_s_per_batch"`
	WorkerPerRow float64 `json:"worker_s_per_input_row"`
	CPUSeconds   float64 `json:"cpu_seconds"`
	Bytes        int64   `json:"bytes"`
}

// StallPoint is the simulated trainers' stall at Load times the
// measured capacity, with Slots-deep rings.
type StallPoint struct {
	Load  float64 `json:"load"`
	Slots int     `json:"slots"`
	Window
}

func (c *PlanConfig) defaults() {
	if c.GPUs <= 0 {
		c.GPUs = max(c.Job.WorldSize, 1)
	}
	if c.MaxCores <= 0 {
		c.MaxCores = cpus.Available()
	}
	if c.Seconds <= 0 {
		c.Seconds = 3
	}
	if c.Warmup <= 0 {
		c.Warmup = 1
	}
	if c.MinUnits <= 0 {
		c.MinUnits = 16
	}
	if len(c.Loads) == 0 {
		c.Loads = []float64{0.5, 0.9, 1.1}
	}
	if c.Repeats <= 0 {
		c.Repeats = 1
	}
	if c.Dist == "" {
		c.Dist = "fixed"
	}
	if c.Progress == nil {
		c.Progress = func(int, int, string) {}
	}
}

// MeasurePlan measures the job on this host: the scaling curve, the
// serial stage, the client's cost, memory, and the stall against load.
func MeasurePlan(ctx context.Context, cfg PlanConfig) (*PlanReport, error) {
	cfg.defaults()
	if cfg.Limit == nil {
		l, err := NewCPULimit()
		if err != nil {
			return nil, err
		}
		defer l.Close()
		cfg.Limit = l
	}
	r := &PlanReport{Spec: cfg.Job.Name, GPUs: cfg.GPUs, BatchSize: cfg.Job.Batch.Size, Limit: cfg.Limit.Method(), Slots: cfg.Job.Ring.Slots, DecodeWorkers: cfg.Job.Decode.Workers,
		Dist: cfg.Dist, Seconds: cfg.Seconds, Warmup: cfg.Warmup, Client: "go"}
	steps := cfg.MaxCores + 1 + len(cfg.Loads)
	step := 0
	for k := 1; k <= cfg.MaxCores; k++ {
		step++
		cfg.Progress(step, steps, "throughput with "+coresWord(float64(k)))
		p, err := measureBest(ctx, cfg, float64(k), k, 0)
		if err != nil {
			return nil, err
		}
		r.Points = append(r.Points, p)
	}
	step++
	cfg.Progress(step, steps, "decode alone, 1 core")
	if err := r.decodeAlone(ctx, cfg); err != nil {
		return nil, err
	}
	if err := r.fit(ctx, cfg); err != nil {
		return nil, err
	}
	// The stall curve is measured at the fastest size measured.
	best := r.Points[0]
	for _, p := range r.Points {
		if p.Rate > best.Rate {
			best = p
		}
	}
	for _, load := range cfg.Loads {
		step++
		cfg.Progress(step, steps, fmt.Sprintf("simulated trainers at %.0f%% of capacity", 100*load))
		rate := load * best.Rate / float64(cfg.GPUs)
		w, err := MeasureAt(ctx, cfg, best.Cores, best.Workers, rate, 0)
		if err != nil {
			return nil, err
		}
		r.Stall = append(r.Stall, StallPoint{Load: load, Slots: cfg.Job.Ring.Slots, Window: w.Window})
		// With the trainers slower than production batches wait for
		// them: the client's own cost per batch shows there.
		if c := w.ClientPerBatch; c > 0 && (r.Measured.ClientPerBatch == 0 || c < r.Measured.ClientPerBatch) {
			r.Measured.ClientPerBatch = c
		}
		if load == 0.9 && w.Stall > 0.01 {
			if err := r.deepen(ctx, cfg, best, rate); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// deepen doubles the ring's depth until the stall at 90% of capacity is
// at most 1%, up to 64 slots.
func (r *PlanReport) deepen(ctx context.Context, cfg PlanConfig, best PlanPoint, rate float64) error {
	job := *cfg.Job
	for slots := max(2*job.Ring.Slots, 2); slots <= 64; slots *= 2 {
		job.Ring.Slots = slots
		c := cfg
		c.Job = &job
		w, err := MeasureAt(ctx, c, best.Cores, best.Workers, rate, 0)
		if err != nil {
			return err
		}
		r.Stall = append(r.Stall, StallPoint{Load: 0.9, Slots: slots, Window: w.Window})
		if w.Stall <= 0.01 {
			r.DepthNeeded = slots
			return nil
		}
	}
	return nil
}

// fit turns the points into plan.Measured.
func (r *PlanReport) fit(ctx context.Context, cfg PlanConfig) error {
	m := &r.Measured
	one := r.Points[0]
	var pts []plan.Point
	for _, p := range r.Points {
		pts = append(pts, plan.Point{Cores: p.Cores, Rate: p.Rate})
		// The serial stage's cost per batch: the least seen, since a
		// loaded host only adds to it.
		if p.PackPerBatch > 0 && (m.PackPerBatch == 0 || p.PackPerBatch < m.PackPerBatch) {
			m.PackPerBatch = p.PackPerBatch
		}
		if p.ClientPerBatch > 0 && (m.ClientPerBatch == 0 || p.ClientPerBatch < m.ClientPerBatch) {
			m.ClientPerBatch = p.ClientPerBatch
		}
	}
	m.BatchSize = cfg.Job.Batch.Size
	ceiling := 0.0
	if m.PackPerBatch > 0 {
		ceiling = float64(m.BatchSize) / m.PackPerBatch
	}
	c, err := plan.Fit(pts, ceiling)
	if err != nil {
		return fmt.Errorf("plan: fit the scaling curve: %w (did the job produce any batch? try -seconds longer)", err)
	}
	m.Curve = c
	if one.Samples > 0 {
		m.BytesPerSample = float64(one.Bytes) / float64(one.Samples)
		r.CPUPerSample = one.CPUSeconds / float64(one.Samples)
	}
	if r.DecodeAlone.Rows > 0 && one.WorkerPerRow > 0 {
		m.DecodeShare = min(r.DecodeAlone.CPUSeconds/float64(r.DecodeAlone.Rows)/one.WorkerPerRow, 1)
	}
	fp, err := engine.EstimateFootprint(ctx, cfg.Job, nil)
	if err != nil {
		return err
	}
	m.UnitBytes = fp.UnitBytes
	m.RingBytesPerGPU = fp.RingBytes / int64(max(fp.Rings, 1))
	m.CacheBytes = int64(cfg.Job.Cache.MaxMemory)
	m.InFlight = cfg.Job.Decode.InFlight
	if m.InFlight == 0 && cfg.Job.Decode.Workers > 0 {
		m.InFlight = 2 * cfg.Job.Decode.Workers // the engine's default, whatever the cores
	}
	m.OtherBytes = fp.ShuffleBytes + fp.SideBytes
	// The arena at the target's ranks; its units in flight are the
	// spec's, or 2 per CPU here until ArenaBytes is asked for the
	// predicted size.
	r.footprint = fp
	m.ArenaBytes = fp.ForRanks(cfg.GPUs).ArenaBytes
	return nil
}

// decodeAlone decodes the pipeline's input columns of the first units
// (about as many rows as the one-core point took in a second) on one
// core: decode's part of a row's cost.
func (r *PlanReport) decodeAlone(ctx context.Context, cfg PlanConfig) error {
	job := cfg.Job
	inputs, opts, err := engine.InputPlan(ctx, job, nil)
	if err != nil {
		return err
	}
	all, err := decode.PlanFiles(ctx, inputs, opts)
	if err != nil {
		return err
	}
	prog, err := ops.Compile(ctx, job, slices.Concat(all.Fields, all.Partitions), ops.Env{Seed: job.Seed, Unreadable: all.Unreadable})
	if err != nil {
		return err
	}
	opts.Columns = prog.Needs()
	p, err := decode.PlanFiles(ctx, inputs, opts)
	if err != nil {
		return err
	}
	want := int64(r.Points[0].InputRate)
	n := 0
	var rows int64
	for n < len(p.Units) && (n == 0 || rows < want) {
		rows += p.Units[n].Rows
		n++
	}
	p.Units = p.Units[:n]
	if err := cfg.Limit.Set(1); err != nil {
		return err
	}
	defer cfg.Limit.Set(0)
	r.DecodeAlone, err = decode.Measure(ctx, p, decode.PathOwn, 1)
	return err
}

// MeasureAt runs the job with workers workers, the process limited to
// cores cores, its rings read by one simulated trainer per rank taking
// rate samples/s each (0: as fast as they come), and measures a window of
// cfg.Seconds after cfg.Warmup; seconds > 0 overrides the window. The job
// runs its epochs without end and without its unit cache: what is
// measured is a first epoch's rate, the cost of every unit.
func MeasureAt(ctx context.Context, cfg PlanConfig, cores float64, workers int, rate, seconds float64) (PlanPoint, error) {
	if seconds > 0 {
		cfg.Seconds = seconds
	}
	pt := PlanPoint{Cores: cores, Workers: workers}
	job := *cfg.Job
	job.WorldSize, job.Decode.Workers = cfg.GPUs, workers
	zero := 0
	job.Epochs = &zero
	job.Cache.MaxMemory = 0
	job.Ring.Dir = cfg.ShmDir
	job.Ring.Name = fmt.Sprintf("lastmile-plan-%d", os.Getpid())
	if err := cfg.Limit.Set(cores); err != nil {
		return pt, err
	}
	defer cfg.Limit.Set(0)
	var step time.Duration
	if rate > 0 {
		step = time.Duration(float64(job.Batch.Size) / rate * float64(time.Second))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	trainers := make([]*Trainer, cfg.GPUs)
	for i := range trainers {
		trainers[i] = NewTrainer(TrainerConfig{Step: step, Dist: cfg.Dist, Seed: uint64(i + 1)})
	}
	var wg sync.WaitGroup
	errs := make([]error, cfg.GPUs+1)
	prog := new(engine.Progress)
	started, ran := make(chan struct{}), make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(ran)
		_, errs[cfg.GPUs] = engine.Run(ctx, &job, engine.Options{Progress: prog, Remove: true,
			Ready: func(rings []string) {
				for i, name := range rings {
					wg.Add(1)
					go func() {
						defer wg.Done()
						errs[i] = trainers[i].Run(ctx, ringDir(cfg.ShmDir), name)
					}()
				}
				close(started)
			}})
	}()
	w, err := measureWindow(ctx, cfg, trainers, prog, started, ran)
	cancel()
	wg.Wait()
	if e := errs[cfg.GPUs]; e != nil && !errors.Is(e, context.Canceled) {
		err = e // why the run ended says more than that it ended
	}
	for _, e := range errs {
		if e != nil && !errors.Is(e, context.Canceled) && err == nil {
			err = e
		}
	}
	if err != nil {
		return pt, fmt.Errorf("measure with %s: %w", coresWord(cores), err)
	}
	pt.Units = w.Units
	pt.Window, pt.InputRate, pt.PackPerBatch, pt.WorkerPerRow, pt.CPUSeconds, pt.Bytes =
		w.Window, w.inputRate, w.packPerBatch, w.workerPerRow, w.cpu, w.bytes
	return pt, nil
}

// window is what measureWindow saw.
type window struct {
	Window
	Units                                      int64
	inputRate, packPerBatch, workerPerRow, cpu float64
	bytes                                      int64
}

// runSnap is a run's counters at one time.
type runSnap struct {
	at                                     time.Time
	units                                  int64
	trainers                               []TrainerCounts
	rows, bytes, batches, pack, decode, in int64
	fullWait                               time.Duration
	cpu                                    float64
}

func snap(trainers []*Trainer, prog *engine.Progress) runSnap {
	s := runSnap{at: time.Now(), units: prog.UnitsDone.Load(), cpu: processCPU(), rows: prog.Rows.Load(), bytes: prog.Bytes.Load(), batches: prog.Batches.Load(),
		pack: prog.PackNanos.Load(), decode: prog.DecodeNanos.Load(), in: prog.LocalRows.Load()}
	for _, st := range prog.RingStats() {
		s.fullWait += st.FullWait
	}
	for _, t := range trainers {
		s.trainers = append(s.trainers, t.Snapshot())
	}
	return s
}

// measureWindow waits for the first batch and the warm-up, then measures
// cfg.Seconds. The run ending before is an error (ran closed).
func measureWindow(ctx context.Context, cfg PlanConfig, trainers []*Trainer, prog *engine.Progress, started, ran <-chan struct{}) (window, error) {
	var w window
	sleep := func(d time.Duration) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ran:
			return errors.New("the job ended before the measurement did")
		case <-t.C:
			return nil
		}
	}
	select {
	case <-ctx.Done():
		return w, ctx.Err()
	case <-ran:
		return w, errors.New("the job ended before its rings were made")
	case <-started:
	}
	for prog.Batches.Load() == 0 {
		// The job runs epochs without end: one that gives no batch (a
		// pipeline that drops every row, inputs without rows, an epoch
		// under one batch per rank) would be waited for for ever.
		if prog.Epoch.Load() >= 2 && prog.Batches.Load() == 0 {
			return w, errors.New("the job gave no batch in a whole epoch: does its pipeline drop every row, or do its inputs hold fewer rows than a batch per rank?")
		}
		if err := sleep(10 * time.Millisecond); err != nil {
			return w, err
		}
	}
	if err := sleep(time.Duration(cfg.Warmup * float64(time.Second))); err != nil {
		return w, err
	}
	a := snap(trainers, prog)
	if err := sleep(time.Duration(cfg.Seconds * float64(time.Second))); err != nil {
		return w, err
	}
	for end := a.at.Add(time.Duration(4 * cfg.Seconds * float64(time.Second))); prog.UnitsDone.Load()-a.units < int64(cfg.MinUnits) && time.Now().Before(end); {
		if err := sleep(50 * time.Millisecond); err != nil {
			return w, err
		}
	}
	b := snap(trainers, prog)
	w.Units = b.units - a.units
	var clientNanos, clientN int64
	for i := range trainers {
		tw := Between(a.trainers[i], b.trainers[i])
		w.Seconds = max(w.Seconds, tw.Seconds)
		w.Batches += tw.Batches
		w.Samples += tw.Samples
		w.Stall += tw.Stall / float64(len(trainers))
		clientNanos += b.trainers[i].ClientNanos - a.trainers[i].ClientNanos
		clientN += b.trainers[i].ClientBatches - a.trainers[i].ClientBatches
	}
	if w.Seconds > 0 {
		w.Rate = float64(w.Samples) / w.Seconds
		w.inputRate = float64(b.in-a.in) / w.Seconds
	}
	if clientN > 0 {
		w.ClientPerBatch = float64(clientNanos) / 1e9 / float64(clientN)
	}
	if n := b.batches - a.batches; n > 0 {
		w.packPerBatch = max(float64(b.pack-a.pack)-float64(b.fullWait-a.fullWait), 0) / 1e9 / float64(n)
	}
	if n := b.in - a.in; n > 0 {
		w.workerPerRow = float64(b.decode-a.decode) / 1e9 / float64(n)
	}
	w.cpu, w.bytes = b.cpu-a.cpu, b.bytes-a.bytes
	return w, nil
}

// measureBest measures cfg.Repeats times with trainers as fast as they
// come and keeps the fastest run.
func measureBest(ctx context.Context, cfg PlanConfig, cores float64, workers int, seconds float64) (PlanPoint, error) {
	var best PlanPoint
	for i := 0; i < max(cfg.Repeats, 1); i++ {
		p, err := MeasureAt(ctx, cfg, cores, workers, 0, seconds)
		if err != nil {
			return p, err
		}
		if i == 0 || p.Rate > best.Rate {
			best = p
		}
	}
	return best, nil
}

// coresWord says x cores, singular for one.
func coresWord(x float64) string {
	if x == 1 {
		return "1 core"
	}
	return fmt.Sprintf("%g cores", x)
}
