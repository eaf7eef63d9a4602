package peer

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/lastmile/lastmile/engine"
)

// When to spill
//
// Spill is on only while the trainers starve although every local worker
// is busy. The policy samples the local side every Tick (Watch), and keeps
// moving means of the rings' fill and of the share of local workers busy,
// over about Smooth: ring fill jumps each time a unit's batches are packed
// and drains between, so single readings say little, and readings taken
// when a unit is claimed (right after an emission) say the rings are
// fuller than they are.
//
// With those means it is a Schmitt trigger in time:
//   - off → on: the mean fill stays under Low with the workers busy (mean
//     busy share at least 0.9) for OnAfter, without the fill reaching
//     High or the workers idling (busy share under 0.5) in between;
//   - on → off: the mean fill stays at High or above, or the workers idle,
//     for OffAfter, without a stall in between.
//
// A trainer stall the daemon measured (Load.Stall, the share of the last
// seconds a trainer waited on an empty ring) of StallOn or more counts as
// starved whatever the mean fill, and keeps the trainers from counting as
// fed: the same signal `lastmile status` turns into advice.
//
// Readings between the thresholds move neither clock. The two thresholds
// and the two delays are the hysteresis that keeps the decision from
// flapping; the delays are short against a run but long against a unit.

// PolicyConfig are the thresholds of the spill decision.
type PolicyConfig struct {
	Low      float64       // mean ring fill under which trainers count as starved; default 0.25
	High     float64       // mean ring fill from which they count as fed; default 0.75
	OnAfter  time.Duration // default 200ms
	OffAfter time.Duration // default 2s
	Tick     time.Duration // sampling period; default 10ms
	Smooth   time.Duration // time constant of the moving means; default 100ms
	StallOn  float64       // measured trainer stall from which trainers count as starved; default 0.05
	// Always spills whenever a peer has credit: for tests and benchmarks.
	Always bool
}

type policy struct {
	cfg      PolicyConfig
	log      *slog.Logger
	mu       sync.Mutex
	on       bool
	since    time.Time // when on last changed
	pending  time.Time // when the condition for a change began (zero: none)
	reason   string    // why on last changed
	why      string    // while off, why (for the declined-units metric)
	fill     float64   // moving mean of the ring fill
	busy     float64   // moving mean of the share of local workers busy
	last     time.Time // last sample
	switches int64
}

func newPolicy(cfg PolicyConfig, log *slog.Logger) *policy {
	if cfg.Low <= 0 {
		cfg.Low = 0.25
	}
	if cfg.High <= 0 {
		cfg.High = 0.75
	}
	if cfg.OnAfter <= 0 {
		cfg.OnAfter = 200 * time.Millisecond
	}
	if cfg.OffAfter <= 0 {
		cfg.OffAfter = 2 * time.Second
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 10 * time.Millisecond
	}
	if cfg.Smooth <= 0 {
		cfg.Smooth = 100 * time.Millisecond
	}
	if cfg.StallOn <= 0 {
		cfg.StallOn = 0.05
	}
	if log == nil {
		log = discardLogger()
	}
	if cfg.Always { // on from the start, and never switched (watch returns at once)
		return &policy{cfg: cfg, log: log, since: time.Now(), on: true, reason: "peers.spill: always", fill: 1}
	}
	return &policy{cfg: cfg, log: log, since: time.Now(), reason: "start: off until trainers starve",
		why: "no stall seen yet", fill: 1, busy: 0}
}

// watch samples load every Tick until ctx is done.
func (p *policy) watch(ctx context.Context, load func() engine.Load) {
	if p.cfg.Always {
		return
	}
	t := time.NewTicker(p.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			p.observe(load(), now)
		}
	}
}

// observe takes one sample of the local side at now.
func (p *policy) observe(l engine.Load, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	busy := 1.0
	if l.LocalWorkers > 0 {
		busy = min(1, float64(l.LocalBusy)/float64(l.LocalWorkers))
	}
	a := 1.0
	if !p.last.IsZero() {
		a = 1 - math.Exp(-float64(now.Sub(p.last))/float64(p.cfg.Smooth))
	}
	p.last = now
	p.fill += a * (l.RingFill - p.fill)
	p.busy += a * (busy - p.busy)
	stalled := l.Stall >= p.cfg.StallOn
	starved := (p.fill < p.cfg.Low || stalled) && p.busy >= 0.9
	fed := p.fill >= p.cfg.High && !stalled
	idle := p.busy < 0.5
	switch {
	case !p.on && (fed || idle), p.on && starved:
		p.pending = time.Time{}
	case !p.on && starved:
		if p.pending.IsZero() {
			p.pending = now
		}
		if now.Sub(p.pending) >= p.cfg.OnAfter {
			p.flip(now, true, "trainers starve with every local worker busy")
		}
	case p.on && (fed || idle):
		if p.pending.IsZero() {
			p.pending = now
		}
		if now.Sub(p.pending) >= p.cfg.OffAfter {
			why := "rings stay full"
			if idle {
				why = "local workers idle"
			}
			p.flip(now, false, why)
		}
	}
	switch {
	case p.on:
	case starved:
		p.why = "waiting for the stall to last"
	case idle:
		p.why = "local workers idle"
	default:
		p.why = "trainers are fed"
	}
}

// current returns whether to spill now, and if not, why.
func (p *policy) current() (bool, string) {
	if p.cfg.Always {
		return true, ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on {
		return true, ""
	}
	return false, p.why
}

func (p *policy) flip(now time.Time, on bool, why string) {
	p.on, p.since, p.reason, p.pending = on, now, why, time.Time{}
	p.switches++
	p.log.Info("spill switched", "on", on, "reason", why, "mean_ring_fill", p.fill, "workers_busy", p.busy)
}

func (p *policy) state() (bool, time.Time, string, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.on, p.since, p.reason, p.switches
}

func float64bits(f float64) uint64     { return math.Float64bits(f) }
func float64frombits(b uint64) float64 { return math.Float64frombits(b) }

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
