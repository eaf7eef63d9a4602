package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/datagen"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/peer"
	"github.com/lastmile/lastmile/roots"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// SpillConfig configures the spill measurement: the pipeline alone on one
// core, against one core plus a CPU peer on another core (docs/peers.md).
type SpillConfig struct {
	Spec string // default examples/ctr-8rank.yaml
	Data string // generated once; default under $TMPDIR
	// Rows is the size of the generated input; default 4 Mi rows, 32 row
	// groups: a run of several seconds, so that what every run pays once
	// (planning, the ring, the last unit's wait) weighs little, as in a
	// real epoch (docs/peers.md, "Runs long enough to measure a rate").
	Rows        int64
	Compression string // default snappy
	ShmDir      string
	// PeerCommand runs a peer serving root "bench" = Data on the address
	// given as its last argument (lastmile bench -spill-peer).
	PeerCommand []string
	// ContendCommand runs RunContender with the flags -spill-cpu,
	// -spill-pipeline and -spill-root appended (lastmile bench
	// -spill-contend); nil: contention is not measured.
	ContendCommand []string
	Units          int // units fetched for the receive-cost figures; default 16
	// UnitRows cuts the run with the peer's units to at most this many
	// rows where the spec sets no size (slicedJob); 0 (the default)
	// keeps the spec's own units, as the reference's; negative, 16,384.
	UnitRows int
	Repeats  int // runs of each side, alternating; the fastest counts; default 3
	// Verify is the share of spilled units verified here
	// (peer.SpillerConfig.Verify): 0, lastmiled's default
	// (peer.DefaultVerify); negative, none.
	Verify float64
	// Consumer starts the process that reads ring dir/name to its end on
	// CPU cpu (lastmile bench -handoff-consumer): the trainers' stand-in,
	// out of the requester's process and off its core, as trainers are
	// off the cores a daemon is given. Nil: a goroutine of this process.
	Consumer func(dir, name string, cpu int) *exec.Cmd
	Log      io.Writer
}

// SpillReport is the spill measurement's result.
type SpillReport struct {
	Spec      string `json:"spec"`
	InputRows int64  `json:"input_rows"`
	Cores     string `json:"cores"` // how the two sides were pinned
	// LocalSeconds is the pipeline alone on the spec's own units (the
	// reference); LocalSlicedSeconds alone on the units the run with the
	// peer gets (reported beside it).
	LocalSeconds       float64 `json:"local_seconds"`
	LocalSlicedSeconds float64 `json:"local_sliced_seconds"`
	SpillSeconds       float64 `json:"spill_seconds"`
	Speedup            float64 `json:"speedup"` // local+peer rows/s over local alone
	Target             float64 `json:"target"`
	Met                bool    `json:"met"`
	UnitsSpilled       int64   `json:"units_spilled"`
	UnitsTotal         int     `json:"units_total"`
	RecvCPUPerGB       float64 `json:"recv_cpu_seconds_per_gb"` // the requester's CPU to receive a GB of unit output
	// RecvOwnCPUPerGB is the part of RecvCPUPerGB that lastmiled measures
	// as it runs (the receiving goroutines', PeerStats.RecvCPUSeconds):
	// the rest is gRPC's transport goroutine.
	RecvOwnCPUPerGB float64 `json:"recv_own_cpu_seconds_per_gb"`
	LocalCPUPerGB   float64 `json:"local_cpu_seconds_per_gb"` // the CPU to compute a GB of the same output here
	OutputRatio     float64 `json:"output_bytes_per_input_row"`
	// WireRatio is the bytes received for those units over their output
	// bytes: below 1 where the compact wire form narrows or trims them
	// (peer/compact.go).
	WireRatio float64 `json:"wire_bytes_per_output_byte"`
	// Bound is the speedup of a perfectly balanced run with a peer as
	// fast as this core: (c + c - r) / c = 2 - RecvCPUPerGB/LocalCPUPerGB,
	// with c a unit's CPU here and r the CPU to receive its output
	// (docs/peers.md, "Measured"). The local packing does not enter it.
	Bound float64 `json:"bound"`
	// LocalBusy and PeerBusy are the CPU seconds each side used during
	// the run with the peer, over its wall time: the side near 1 is the
	// one that binds.
	LocalBusy float64 `json:"local_busy"`
	PeerBusy  float64 `json:"peer_busy"`
	// RoundTripMS is a unit's round trip to the peer, fetched alone;
	// ComputeMS computing the same unit here.
	RoundTripMS float64 `json:"round_trip_ms"`
	ComputeMS   float64 `json:"compute_ms"`
	// AloneCPU and ContendedCPU are the CPU seconds of a pass over the
	// job's units on this core, alone and while the other core computes
	// the same units; Ceiling = 2 × AloneCPU / ContendedCPU is the most
	// any run on the two cores can get here (spill_contend.go).
	AloneCPU     float64 `json:"alone_cpu_seconds,omitempty"`
	ContendedCPU float64 `json:"contended_cpu_seconds,omitempty"`
	Ceiling      float64 `json:"ceiling,omitempty"`

	// UnitsVerified are the spilled units of the fastest run with the
	// peer computed here as well (peers.verify), at the share Verify.
	UnitsVerified int64   `json:"units_verified"`
	Verify        float64 `json:"verify"`
}

func (c *SpillConfig) defaults() {
	if c.Spec == "" {
		c.Spec = "examples/ctr-8rank.yaml"
	}
	if c.Rows <= 0 {
		c.Rows = 4 << 20
	}
	if c.Compression == "" {
		c.Compression = "snappy"
	}
	if c.Data == "" {
		c.Data = filepath.Join(os.TempDir(), fmt.Sprintf("lastmile-bench-spill-%d-%s", c.Rows, c.Compression))
	}
	if c.Units <= 0 {
		c.Units = 16
	}
	if c.Repeats <= 0 {
		c.Repeats = 3
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// RunSpill measures, in one run, the example pipeline on one core alone
// and on one core with a CPU peer on a second core, and what receiving a
// unit's output costs the requester against computing it.
func RunSpill(ctx context.Context, cfg SpillConfig) (*SpillReport, error) {
	cfg.defaults()
	r := &SpillReport{Spec: cfg.Spec, Target: 1.8, Verify: spillerVerify(cfg.Verify)}
	parquet, spam := filepath.Join(cfg.Data, "parquet"), filepath.Join(cfg.Data, "spam.parquet")
	if err := genSpillData(ctx, cfg, parquet, spam); err != nil {
		return nil, err
	}
	text, err := os.ReadFile(cfg.Spec)
	if err != nil {
		return nil, err
	}
	alone, err := spillJob(cfg, text, parquet, spam)
	if err != nil {
		return nil, err
	}
	job := slicedJob(alone, cfg.UnitRows)
	local, peerCPU, err := pinCores()
	if err != nil {
		return nil, err
	}
	r.Cores = fmt.Sprintf("requester on CPU %d, peer on CPU %d", local, peerCPU)
	addr, stop, peerCPUTime, tlsFiles, err := startPeer(ctx, cfg, peerCPU)
	if err != nil {
		return nil, err
	}
	defer stop()

	fp, err := engine.EstimateFootprint(ctx, job, nil)
	if err != nil {
		return nil, err
	}
	r.UnitsTotal, r.InputRows = fp.Units, fp.Rows
	// Units exactly as the engine makes them, for the warm-up and the
	// receive cost: those a spill worker is offered in a run.
	rec := &recordUnits{n: cfg.Units}
	var drain drainer
	if cfg.Consumer != nil {
		drain = func(dir, name string) *exec.Cmd {
			cmd := cfg.Consumer(dir, name, peerCPU)
			cmd.Stderr = cfg.Log
			return cmd
		}
	}
	if _, err := runDrained(ctx, job, rec, drain, nil); err != nil {
		return nil, err
	}
	sp, pool, rts, err := newBenchSpiller(cfg, tlsFiles, addr, string(text), job)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	defer rts.Close()
	// The peer compiles a job once (its side tables included); that is
	// not the steady state measured here.
	var warm column.Batch
	if ran, err := sp.RunUnit(ctx, rec.units[0], &warm, engine.Load{}); err != nil || !ran {
		return nil, fmt.Errorf("spill: warm the peer up: ran %v, %v", ran, err)
	}
	if err := alternate(ctx, cfg, alone, job, sp, pool, drain, peerCPUTime, local, peerCPU, r); err != nil {
		return nil, err
	}
	r.Speedup = r.LocalSeconds / r.SpillSeconds
	r.Met = r.Speedup >= r.Target
	before := pool.Stats()[0]
	if err := receiveCost(ctx, job, sp, rec.units, r); err != nil {
		return nil, err
	}
	if after := pool.Stats()[0]; after.Bytes > before.Bytes {
		r.WireRatio = float64(after.WireBytes-before.WireBytes) / float64(after.Bytes-before.Bytes)
	}
	if r.AloneCPU, r.ContendedCPU, err = contention(ctx, cfg, job, peerCPU); err != nil {
		return nil, err
	}
	if r.ContendedCPU > 0 {
		r.Ceiling = 2 * r.AloneCPU / r.ContendedCPU
	}
	return r, nil
}

// alternate runs the job alone (on the spec's units: alone) and with the
// peer (job: the same units by default, or cut by -spill-unit-rows), in
// turn, Repeats times; the fastest of each counts, as in the rest of
// bench. Where the units were cut, the run alone on them is reported
// beside (LocalSlicedSeconds).
func alternate(ctx context.Context, cfg SpillConfig, alone, job *spec.Job, sp *peer.Spiller, pool *peer.Pool,
	drain drainer, peerCPUTime func() float64, local, peerCPU int, r *SpillReport) error {
	for i := range cfg.Repeats {
		fmt.Fprintf(cfg.Log, "spill: run %d of %d: the pipeline alone, one worker on CPU %d ...\n", i+1, cfg.Repeats, local)
		st, err := runDrained(ctx, alone, nil, drain, nil)
		if err != nil {
			return err
		}
		if i == 0 || st.Elapsed.Seconds() < r.LocalSeconds {
			r.LocalSeconds = st.Elapsed.Seconds()
		}
		if job.Decode.MaxUnitRows != alone.Decode.MaxUnitRows {
			fmt.Fprintf(cfg.Log, "spill: run %d of %d: the pipeline alone on the peer run's units of %d rows ...\n", i+1, cfg.Repeats, job.Decode.MaxUnitRows)
			if st, err = runDrained(ctx, job, nil, drain, nil); err != nil {
				return err
			}
			if i == 0 || st.Elapsed.Seconds() < r.LocalSlicedSeconds {
				r.LocalSlicedSeconds = st.Elapsed.Seconds()
			}
		}
		fmt.Fprintf(cfg.Log, "spill: run %d of %d: one worker on CPU %d plus the peer on CPU %d ...\n", i+1, cfg.Repeats, local, peerCPU)
		if err := spillRun(ctx, cfg, job, sp, pool, drain, peerCPUTime, i == 0, r); err != nil {
			return err
		}
	}
	return nil
}

// spillRun runs the job once with the peer, keeping its figures in r if
// it is the fastest so far (or first).
func spillRun(ctx context.Context, cfg SpillConfig, job *spec.Job, sp *peer.Spiller, pool *peer.Pool,
	drain drainer, peerCPUTime func() float64, first bool, r *SpillReport) error {
	spilled0 := sp.Stats().Spilled.Load()
	cpu0, peer0 := processCPU(), peerCPUTime()
	var prog engine.Progress
	st, err := runDrained(ctx, job, sp, drain, &prog)
	if err != nil {
		return err
	}
	secs := st.Elapsed.Seconds()
	spilled := sp.Stats().Spilled.Load() - spilled0
	for _, ps := range pool.Stats() {
		fmt.Fprintf(cfg.Log, "spill: %.2f s; peer %s: mean round trip %v, %d failures; %d of %d units computed here; kept local: %v; hedged %d, won here %d; verified %d\n",
			secs, ps.Addr, ps.Latency.Round(time.Millisecond), ps.Failures, int64(st.Units)-spilled, st.Units, sp.Stats().Declined(),
			prog.UnitsHedged.Load(), prog.HedgesWon.Load(), prog.UnitsVerified.Load())
	}
	if !first && secs >= r.SpillSeconds {
		return nil
	}
	r.SpillSeconds, r.UnitsSpilled, r.UnitsVerified = secs, spilled, prog.UnitsVerified.Load()
	r.LocalBusy = (processCPU() - cpu0) / secs
	r.PeerBusy = (peerCPUTime() - peer0) / secs
	return nil
}

func genSpillData(ctx context.Context, cfg SpillConfig, parquet, spam string) error {
	gc := datagen.DefaultConfig()
	gc.Rows, gc.Files, gc.Compression = cfg.Rows, 4, cfg.Compression
	if m, _ := filepath.Glob(filepath.Join(parquet, "*.parquet")); len(m) == 0 {
		fmt.Fprintf(cfg.Log, "generating %d rows of Parquet in %s ...\n", gc.Rows, parquet)
		if _, err := datagen.Write(ctx, parquet, gc); err != nil {
			return err
		}
	}
	if _, err := os.Stat(spam); err != nil {
		return datagen.WriteSpamUsers(ctx, spam, gc, 0.02)
	}
	return nil
}

// spillJob is the spec's job over the generated data: one rank, one
// epoch, one local worker, no unit cache, on the spec's own units. It is
// the local-alone reference; the run with the peer takes slicedJob's.
func spillJob(cfg SpillConfig, text []byte, parquet, spam string) (*spec.Job, error) {
	job, err := spec.Parse(cfg.Spec, text)
	if err != nil {
		return nil, err
	}
	one := 1
	job.Inputs, job.WorldSize, job.Epochs = []string{parquet}, 1, &one
	job.Decode.Workers = 1
	job.Cache.MaxMemory = 0
	job.Ring.Dir, job.Ring.Name = cfg.ShmDir, fmt.Sprintf("lastmile-bench-spill-%d", os.Getpid())
	for i := range job.Pipeline {
		if j := job.Pipeline[i].Join; j != nil {
			j.Table = spam
		}
	}
	return job, nil
}

// slicedJob is job with units of at most rows rows (negative: 16,384;
// 0: job as it is) where the spec sets no size: units small enough to
// balance between two sides, for the run with the peer. They are not the
// local reference: on data with one page per row group they decode about
// 1.5x slower than whole groups.
func slicedJob(job *spec.Job, rows int) *spec.Job {
	j := *job
	if rows < 0 {
		rows = 16384
	}
	if j.Decode.MaxUnitRows == 0 {
		j.Decode.MaxUnitRows = int64(rows)
	}
	return &j
}

// ServePeer is the peer side of the measurement: a peer over root
// "bench" = dir on addr, pinned to cpu, until ctx is done.
func ServePeer(ctx context.Context, addr, dir string, cpu int, tlsFiles peer.TLSFiles) error {
	if err := PinProcess(cpu); err != nil {
		return err
	}
	r, err := roots.New(map[string]string{"bench": dir})
	if err != nil {
		return err
	}
	defer r.Close()
	tc, err := tlsFiles.ServerTLS()
	if err != nil {
		return err
	}
	// The bench peer reads the data this process wrote for itself, for
	// whoever runs the bench (root included).
	s := peer.NewServer(peer.ServerConfig{Roots: r, TLS: tc, Workers: 1, MaxInFlight: 4, TrustRoot: true})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); s.Stop() }()
	return s.Serve(l)
}

func newBenchSpiller(cfg SpillConfig, f peer.TLSFiles, addr, text string, job *spec.Job) (*peer.Spiller, *peer.Pool, *roots.Roots, error) {
	rts, err := roots.New(map[string]string{"bench": cfg.Data})
	if err != nil {
		return nil, nil, nil, err
	}
	tc, err := f.ClientTLS("")
	if err != nil {
		return nil, nil, nil, err
	}
	// The pool's and the spiller's defaults, as lastmiled's: 4 credits,
	// and as many spill workers.
	pool, err := peer.NewPool(peer.PoolConfig{Addrs: []string{addr}, TLS: tc})
	if err != nil {
		return nil, nil, nil, err
	}
	self := peer.Self()
	sp, err := peer.NewSpiller(pool, rts, text, job, peer.SpillerConfig{User: &self, Verify: cfg.Verify, Policy: peer.PolicyConfig{Always: true}})
	if err != nil {
		pool.Close()
		return nil, nil, nil, err
	}
	return sp, pool, rts, nil
}

// spillerVerify is the share a Spiller of SpillConfig.Verify verifies.
func spillerVerify(v float64) float64 {
	switch {
	case v == 0:
		return peer.DefaultVerify
	case v < 0:
		return 0
	}
	return min(v, 1)
}

// drainer starts a process that reads ring dir/name to its end; nil
// drains in a goroutine of this process.
type drainer func(dir, name string) *exec.Cmd

// runDrained runs job with spill (nil: none) while consumers drain its
// rings: a process per ring started by drain, or goroutines.
func runDrained(ctx context.Context, job *spec.Job, spill engine.Spill, drain drainer, prog *engine.Progress) (engine.Stats, error) {
	if drain != nil {
		var cmds []*exec.Cmd
		for r := range job.WorldSize {
			cmd := drain(job.Ring.Dir, job.RingName(r))
			if err := cmd.Start(); err != nil {
				return engine.Stats{}, fmt.Errorf("spill: consumer: %w", err)
			}
			defer cmd.Process.Kill()
			cmds = append(cmds, cmd)
		}
		st, err := engine.Run(ctx, job, engine.Options{Spill: spill, Linger: true, Remove: true, Progress: prog})
		if err != nil {
			return st, err
		}
		for _, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				return st, fmt.Errorf("spill: consumer: %w", err)
			}
		}
		return st, nil
	}
	var wg sync.WaitGroup
	ready := func(rings []string) {
		for _, name := range rings {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := shm.Open(job.Ring.Dir, name)
				if err != nil {
					return
				}
				defer c.Close()
				for {
					if _, err := c.Next(ctx); err != nil {
						return
					}
					c.Release()
				}
			}()
		}
	}
	st, err := engine.Run(ctx, job, engine.Options{Spill: spill, Ready: ready, Remove: true, Progress: prog})
	wg.Wait()
	return st, err
}

// recordUnits declines every unit and keeps the first n.
type recordUnits struct {
	mu    sync.Mutex
	n     int
	units []decode.Unit
}

func (r *recordUnits) Slots() int                                { return 1 }
func (r *recordUnits) Planned(*decode.Plan)                      {}
func (r *recordUnits) Watch(context.Context, func() engine.Load) {}
func (r *recordUnits) RunUnit(_ context.Context, u decode.Unit, _ *column.Batch, _ engine.Load) (bool, error) {
	r.mu.Lock()
	if len(r.units) < r.n {
		r.units = append(r.units, u)
	}
	r.mu.Unlock()
	return false, nil
}

// receiveCost fetches units from the peer one at a time and computes the
// same units here, measuring this process's CPU per GB of output for each.
func receiveCost(ctx context.Context, job *spec.Job, sp *peer.Spiller, units []decode.Unit, r *SpillReport) error {
	up, err := engine.NewUnitProcessor(ctx, job, nil, 1)
	if err != nil {
		return err
	}
	defer up.Close()
	var out column.Batch
	var bytes, rows int64
	own0 := sp.Stats().RecvCPUNanos.Load()
	cpu0 := processCPU()
	tf := time.Now()
	for _, u := range units {
		if ran, err := sp.RunUnit(ctx, u, &out, engine.Load{}); err != nil || !ran {
			return fmt.Errorf("spill: fetch a unit for the receive cost: ran %v, %v", ran, err)
		}
		bytes += int64(out.Bytes())
		rows += u.Rows
	}
	recv := processCPU() - cpu0
	own := time.Duration(sp.Stats().RecvCPUNanos.Load() - own0).Seconds()
	r.RoundTripMS = time.Since(tf).Seconds() * 1000 / float64(max(len(units), 1))
	cpu0 = processCPU()
	t0 := time.Now()
	for _, u := range units {
		if err := up.Compute(ctx, u, &out); err != nil {
			return err
		}
	}
	comp := processCPU() - cpu0
	r.ComputeMS = time.Since(t0).Seconds() * 1000 / float64(max(len(units), 1))
	if bytes > 0 {
		r.RecvCPUPerGB = recv / (float64(bytes) / 1e9)
		r.RecvOwnCPUPerGB = own / (float64(bytes) / 1e9)
		r.LocalCPUPerGB = comp / (float64(bytes) / 1e9)
		r.OutputRatio = float64(bytes) / float64(rows)
		if r.LocalCPUPerGB > 0 {
			r.Bound = 2 - r.RecvCPUPerGB/r.LocalCPUPerGB
		}
	}
	return nil
}

// WriteTable prints the report's measurements (its target: Targets).
func (r *SpillReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "spill: %s, %d input rows, %d units; %s\n", r.Spec, r.InputRows, r.UnitsTotal, r.Cores)
	if r.LocalSlicedSeconds > 0 {
		fmt.Fprintf(w, "  local alone, 1 core          %8.2f s  (the spec's units; %.2f s on the peer run's)\n", r.LocalSeconds, r.LocalSlicedSeconds)
	} else {
		fmt.Fprintf(w, "  local alone, 1 core          %8.2f s  (the spec's units, as the run with the peer)\n", r.LocalSeconds)
	}
	fmt.Fprintf(w, "  local 1 core + peer 1 core   %8.2f s  (%d units on the peer, %d of them verified here at peers.verify %g)\n",
		r.SpillSeconds, r.UnitsSpilled, r.UnitsVerified, r.Verify)
	fmt.Fprintf(w, "  speedup                      %8.2fx\n", r.Speedup)
	fmt.Fprintf(w, "  CPU busy with the peer        local %.2f, peer %.2f  (CPU seconds over the run's wall time)\n", r.LocalBusy, r.PeerBusy)
	fmt.Fprintf(w, "  a unit alone                 %8.1f ms round trip to the peer, %.1f ms to compute here\n", r.RoundTripMS, r.ComputeMS)
	fmt.Fprintf(w, "  receive CPU per GB of output %8.3f s  (computing it here: %.3f s; %.1f output bytes per input row)\n",
		r.RecvCPUPerGB, r.LocalCPUPerGB, r.OutputRatio)
	fmt.Fprintf(w, "    of which lastmiled counts  %8.3f s  (its receiving goroutines' own; the rest is gRPC's transport)\n", r.RecvOwnCPUPerGB)
	fmt.Fprintf(w, "  on the wire                  %8.3f bytes a byte of output\n", r.WireRatio)
	fmt.Fprintf(w, "  bound, a peer as fast as here %7.2fx  (2 - receive/compute: a perfectly balanced run)\n", r.Bound)
	if r.Ceiling > 0 {
		fmt.Fprintf(w, "  two cores computing apart    %8.2fx  (a pass over the units: %.2f CPU s alone, %.2f beside the same on the other core)\n",
			r.Ceiling, r.AloneCPU, r.ContendedCPU)
	}
}
