package plan

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// Target is what a training job consumes on one host.
type Target struct {
	GPUs          int     `json:"gpus"`            // trainer ranks on the host, one per GPU
	SamplesPerGPU float64 `json:"samples_per_gpu"` // samples/s each GPU's trainer takes
}

// TargetFromStep is the target of GPUs trainers that each take a batch
// of batch samples every step seconds.
func TargetFromStep(gpus int, step float64, batch int) (Target, error) {
	if step <= 0 || batch <= 0 {
		return Target{}, fmt.Errorf("plan: a step of %gs and a batch of %d: want both > 0", step, batch)
	}
	return Target{GPUs: gpus, SamplesPerGPU: float64(batch) / step}, nil
}

// HostRate is the samples/s the host's trainers take together.
func (t Target) HostRate() float64 { return float64(t.GPUs) * t.SamplesPerGPU }

// Measured is what was measured on a host, per sample (an output row of
// the pipeline) or per batch.
type Measured struct {
	// Curve is the pipeline's throughput against cores, its Ceiling the
	// serial stage's (the batcher's) cap.
	Curve Curve `json:"curve"`
	// DecodeShare is the share of the pipeline's CPU spent decoding
	// Parquet; the rest is the ops (and packing).
	DecodeShare float64 `json:"decode_share"`
	// PackPerBatch is the serial stage's time per batch, in seconds:
	// reorder, shuffle, deal and copy into a ring slot (the ring handoff).
	PackPerBatch float64 `json:"pack_s_per_batch"`
	// ClientPerBatch is the trainer client's time per batch, in seconds,
	// on the trainer's CPU: what a batch costs the trainer to take.
	ClientPerBatch float64 `json:"client_s_per_batch"`
	BatchSize      int     `json:"batch_size"`
	// BytesPerSample is the ring payload per sample: what a peer sends
	// per sample it computes.
	BytesPerSample float64 `json:"bytes_per_sample"`
	// UnitBytes is the memory one decoded unit in flight holds;
	// RingBytesPerGPU one rank's ring; CacheBytes the unit cache's bound.
	UnitBytes       int64 `json:"unit_bytes"`
	RingBytesPerGPU int64 `json:"ring_bytes_per_gpu"`
	CacheBytes      int64 `json:"cache_bytes"`
	// InFlight is the spec's decoded units in flight (decode.inflight,
	// or 2 per decode.workers); 0: Resources.InFlightPerCore per core.
	InFlight int `json:"inflight"`
	// OtherBytes is what else the daemon charges the job beside the
	// rings, the units in flight, the cache and the arena: the shuffle
	// window and the joins' side tables (engine.Footprint).
	OtherBytes int64 `json:"other_bytes"`
	// ArenaBytes is the unit arena's file (ring.arena; 0: none) for the
	// target's GPUs and the prediction's units in flight: its chunks
	// grow with both, so the caller sizes it for the prediction
	// (engine.Footprint.ArenaFor with Prediction.UnitsInFlight).
	ArenaBytes int64 `json:"arena_bytes"`
	// PeerPerCore is one peer core's samples/s (0: a local core's, since
	// a peer runs the same code on the same units).
	PeerPerCore float64 `json:"peer_per_core_samples_per_s"`
	// ReceiveCPUPerByte is the requester's CPU, in seconds per byte, to
	// receive a peer's output.
	ReceiveCPUPerByte float64 `json:"receive_cpu_s_per_byte"`
	// WirePerByte is the bytes a peer's output takes on the network per
	// byte of it (below 1 in the compact wire form, docs/peers.md); 0 is
	// taken as 1.
	WirePerByte float64 `json:"wire_bytes_per_byte"`
}

// Resources are what a GPU host, and its peers, offer.
type Resources struct {
	HostCores int `json:"host_cores"` // cores of a GPU host lastmile may use
	PeerCores int `json:"peer_cores"` // cores of one CPU peer; 0: no peers
	// NetworkBytesPerSec is the host's network for peer traffic; 0 is
	// 1.25e9 (10 GbE).
	NetworkBytesPerSec float64 `json:"network_bytes_per_s"`
	// InFlightPerCore is the decoded units in flight per worker (the
	// engine's default decode.inflight is 2 per worker); 0 is 2.
	InFlightPerCore int `json:"inflight_per_core"`
}

// The resources a prediction names.
const (
	ResDecode  = "decode CPU"
	ResOps     = "ops CPU"
	ResRing    = "ring"
	ResClient  = "trainer client"
	ResNetwork = "network"
)

// Prediction is what a target needs, and what the job will do at that
// size.
type Prediction struct {
	Target   Target  `json:"target"`
	HostRate float64 `json:"host_samples_per_s"`
	// CoresExact is the cores the curve needs for HostRate, unrounded
	// (+Inf: no number of cores reaches it; JSON null).
	CoresExact   float64 `json:"-"`
	CoresPerHost int     `json:"cores_per_host"` // local cores, rounded up, at most the host's when peers take the rest
	CoresPerGPU  float64 `json:"cores_per_gpu"`  // CoresPerHost / GPUs
	LocalRate    float64 `json:"local_samples_per_s"`
	// Peers is the CPU peers needed (of Resources.PeerCores cores),
	// PeerRate what they produce together, NetworkBytesPerSec what the
	// host receives from them, ReceiveCores the local cores receiving
	// takes.
	Peers              int     `json:"peers"`
	PeerRate           float64 `json:"peer_samples_per_s"`
	NetworkBytesPerSec float64 `json:"network_bytes_per_s"`
	ReceiveCores       float64 `json:"receive_cores"`
	MemoryBytes        int64   `json:"memory_bytes"`
	UnitsInFlight      int     `json:"units_in_flight"` // decoded units MemoryBytes counts
	// Capacity is the samples/s the predicted size produces; Stall the
	// expected share of the trainers' time waiting on an empty ring.
	Capacity float64 `json:"capacity_samples_per_s"`
	Stall    float64 `json:"stall"`
	// Binding is the resource with the highest Utilization (1: fully
	// used at the target; above 1: the target is out of its reach).
	Binding     string             `json:"binding"`
	Utilization map[string]float64 `json:"utilization"`
	Feasible    bool               `json:"feasible"`
	Notes       []string           `json:"notes,omitempty"`
}

// Predict says what target needs on a host that measured m, with res.
func Predict(t Target, m Measured, res Resources) (Prediction, error) {
	if t.GPUs <= 0 || !(t.SamplesPerGPU > 0) {
		return Prediction{}, fmt.Errorf("plan: target of %d GPUs at %g samples/s each: want both > 0", t.GPUs, t.SamplesPerGPU)
	}
	if math.IsInf(t.HostRate(), 0) {
		return Prediction{}, fmt.Errorf("plan: target of %d GPUs at %g samples/s each: %g samples/s in all is not a rate", t.GPUs, t.SamplesPerGPU, t.HostRate())
	}
	if res.HostCores <= 0 {
		return Prediction{}, errors.New("plan: the host's cores must be > 0")
	}
	if m.Curve.PerCore <= 0 {
		return Prediction{}, errors.New("plan: the scaling curve has no rate per core: measure it first")
	}
	if res.NetworkBytesPerSec <= 0 {
		res.NetworkBytesPerSec = 1.25e9
	}
	if res.InFlightPerCore <= 0 {
		res.InFlightPerCore = 2
	}
	p := Prediction{Target: t, HostRate: t.HostRate(), Utilization: map[string]float64{}, Feasible: true}
	h := p.HostRate
	k, reachable := m.Curve.CoresFor(h)
	p.CoresExact = k
	switch {
	case reachable && RoundUp(k) <= res.HostCores:
		// The need rounded as documented (2.0000001 cores is 2) is what
		// must fit, not the unrounded figure.
		p.CoresPerHost = max(RoundUp(k), 1) // a job has at least one worker
		p.LocalRate = m.Curve.Rate(float64(p.CoresPerHost))
		p.Capacity = p.LocalRate
	case res.PeerCores > 0:
		p.withPeers(m, res)
	default:
		p.Feasible = false
		p.CoresPerHost = RoundUp(k)
		if !reachable {
			// More cores than those that reach the limit add nothing.
			p.CoresPerHost = res.HostCores
			if kc, ok := m.Curve.CoresFor(m.Curve.Limit()); ok {
				p.CoresPerHost = min(RoundUp(kc), res.HostCores)
			}
		}
		p.LocalRate = m.Curve.Rate(float64(min(p.CoresPerHost, res.HostCores)))
		p.Capacity = p.LocalRate
		if reachable {
			p.note("needs %.1f cores but the host gives %d: configure CPU peers (-peer-cores) or lower the target", k, res.HostCores)
		} else {
			p.note("no number of local cores reaches %.0f samples/s: the curve levels off at %.0f", h, m.Curve.Limit())
		}
	}
	p.CoresPerGPU = float64(p.CoresPerHost) / float64(t.GPUs)
	p.UnitsInFlight = res.InFlightPerCore * max(p.CoresPerHost, 1)
	if m.InFlight > 0 {
		p.UnitsInFlight = m.InFlight // the spec says
	}
	p.MemoryBytes = int64(t.GPUs)*m.RingBytesPerGPU + int64(p.UnitsInFlight)*m.UnitBytes + m.CacheBytes + m.OtherBytes + m.ArenaBytes
	if p.Capacity > 0 {
		p.Stall = StallAt(h / p.Capacity)
	} else {
		p.Stall = 1
	}
	p.utilization(m, res)
	return p, nil
}

// SpillCostRatio is the daemon's cost rule: it spills a unit only when
// receiving its output is expected to cost under this share of computing
// it here (peer.SpillerConfig.MaxCostRatio's default, docs/peers.md).
// Peers that receiving costs more than that would never be sent a unit.
const SpillCostRatio = 0.8

// withPeers sizes the peers that take what the host's cores cannot: the
// host keeps all its cores; receiving costs it CPU, so a spilled sample
// frees 1/e − recv of a core's second, where e is a local core's rate.
func (p *Prediction) withPeers(m Measured, res Resources) {
	h, cores := p.HostRate, float64(res.HostCores)
	p.CoresPerHost = res.HostCores
	e := m.Curve.Rate(cores) / cores
	recv := m.ReceiveCPUPerByte * m.BytesPerSample // CPU s per spilled sample
	if recv*e >= SpillCostRatio {
		p.Feasible = false
		p.LocalRate, p.Capacity = m.Curve.Rate(cores), m.Curve.Rate(cores)
		p.note("receiving a sample from a peer costs this host %.2g s of CPU, %.0f%% of computing it (%.2g s): the daemon spills a unit only under %.0f%%, so peers cannot help",
			recv, 100*recv*e, 1/e, 100*SpillCostRatio)
		return
	}
	y := (h - cores*e) / (1 - recv*e) // samples/s the peers must produce
	// Receiving takes the host's CPU: its cores can receive at most
	// cores/recv samples/s, however many peers send them.
	maxRecv := math.Inf(1)
	if recv > 0 {
		maxRecv = cores / recv
	}
	short := y > maxRecv*(1+1e-6)
	if short {
		p.note("receiving %.0f samples/s from peers would take %.1f of the host's %d cores: receiving alone caps the host at %.0f samples/s",
			y, y*recv, res.HostCores, maxRecv)
		y = maxRecv
	}
	per := m.PeerPerCore
	if per <= 0 {
		per = m.Curve.PerCore
	}
	// A peer computes units and streams them: the host's serial stage
	// (the ceiling) is not its bound.
	peer := Curve{PerCore: per, Serial: m.Curve.Serial}.Rate(float64(res.PeerCores))
	p.Peers = RoundUp(y / peer)
	p.PeerRate = y
	wire := m.WirePerByte
	if wire <= 0 {
		wire = 1
	}
	p.NetworkBytesPerSec = y * m.BytesPerSample * wire
	p.ReceiveCores = y * recv
	p.LocalRate = h - y
	if short {
		p.LocalRate = 0 // every core receives
	}
	// What the peers send beyond what the host can receive adds nothing.
	spilled := min(float64(p.Peers)*peer, maxRecv)
	p.Capacity = max(cores-spilled*recv, 0)*e + spilled
	if m.Curve.Ceiling > 0 && p.Capacity > m.Curve.Ceiling {
		p.Capacity = m.Curve.Ceiling
	}
	// The same forgiveness of the last digits as RoundUp's: 3.0000001
	// peers are 3.
	if short || p.Capacity < h*(1-1e-6) {
		p.Feasible = false
		switch {
		case short: // the note above says why
		case m.Curve.Ceiling > 0 && p.Capacity >= m.Curve.Ceiling:
			p.note("the ring's serial stage caps the host at %.0f samples/s, under the target: more peers do not help", m.Curve.Ceiling)
		default:
			p.note("%d peers give %.0f samples/s, under the target", p.Peers, p.Capacity)
		}
	}
}

func (p *Prediction) utilization(m Measured, res Resources) {
	h := p.HostRate
	cpu := ResOps
	if m.DecodeShare >= 0.5 {
		cpu = ResDecode
	}
	// The CPU stage's own need: the serial stage's cap is the ring's.
	kc, _ := Curve{PerCore: m.Curve.PerCore, Serial: m.Curve.Serial}.CoresFor(h)
	p.Utilization[cpu] = kc / float64(res.HostCores)
	if p.Peers > 0 {
		// Peers take the excess: the host's cores are full, not short.
		p.Utilization[cpu] = 1
	}
	if m.PackPerBatch > 0 && m.BatchSize > 0 {
		p.Utilization[ResRing] = h * m.PackPerBatch / float64(m.BatchSize)
	}
	if m.ClientPerBatch > 0 && m.BatchSize > 0 {
		p.Utilization[ResClient] = p.Target.SamplesPerGPU * m.ClientPerBatch / float64(m.BatchSize)
	}
	if p.NetworkBytesPerSec > 0 {
		p.Utilization[ResNetwork] = p.NetworkBytesPerSec / res.NetworkBytesPerSec
	}
	names := make([]string, 0, len(p.Utilization))
	for n, u := range p.Utilization {
		if math.IsInf(u, 1) || math.IsNaN(u) {
			p.Utilization[n] = 1e9 // out of reach; JSON has no +Inf
		}
		names = append(names, n)
	}
	sort.Strings(names) // ties go the same way every time
	best := -1.0
	for _, n := range names {
		if u := p.Utilization[n]; u > best {
			best, p.Binding = u, n
		}
	}
	for _, n := range names {
		u := p.Utilization[n]
		if u > 1+1e-9 && (n == ResClient || n == ResNetwork || n == ResRing) {
			p.Feasible = false
			p.note("%s is over capacity at the target: %.0f%% of it", n, 100*u)
		}
	}
}

func (p *Prediction) note(format string, args ...any) {
	p.Notes = append(p.Notes, fmt.Sprintf(format, args...))
}

// StallAt is the expected share of a trainer's time spent waiting on an
// empty ring when it asks for load times what production gives (load 1:
// exactly the capacity). Below 1 a deep enough ring absorbs the bursts
// and the stall is 0; above, the trainer waits for the shortfall.
func StallAt(load float64) float64 {
	if load <= 1 || math.IsNaN(load) {
		return 0
	}
	return 1 - 1/load
}
