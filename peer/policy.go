package peer

import (
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/lastmile/lastmile/engine"
)

// When to spill
//
// Spill is on only while the trainers starve although every local worker
// is busy: the rings sit near empty (RingFill below Low) and no local
// worker is idle. It switches on after that has held for OnAfter, and off
// after the rings have stayed above High, or a local worker has stayed
// idle, for OffAfter. The two thresholds and the two delays are the
// hysteresis that keeps the decision from flapping; the delays are short
// against a run's length but long against a unit's time.
//
// The policy sees the local side only when a spill worker asks, which is
// as often as units are claimed; a decision therefore changes at unit
// granularity, which is the granularity that matters.

// PolicyConfig are the thresholds of the spill decision.
type PolicyConfig struct {
	Low      float64       // ring fill under which trainers count as starved; default 0.25
	High     float64       // ring fill from which they count as fed; default 0.75
	OnAfter  time.Duration // default 200ms
	OffAfter time.Duration // default 2s
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
	reason   string
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
	if log == nil {
		log = discardLogger()
	}
	return &policy{cfg: cfg, log: log, since: time.Now(), reason: "start: off until trainers starve"}
}

// decide returns whether to spill now, and if not, why.
func (p *policy) decide(l engine.Load, now time.Time) (bool, string) {
	if p.cfg.Always {
		return true, ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	starved := l.RingFill < p.cfg.Low && l.LocalBusy >= l.LocalWorkers
	fed := l.RingFill >= p.cfg.High
	idle := l.LocalBusy < l.LocalWorkers
	switch {
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
				why = "a local worker is idle"
			}
			p.flip(now, false, why)
		}
	default:
		p.pending = time.Time{}
	}
	if p.on {
		return true, ""
	}
	if !starved {
		return false, "trainers are fed"
	}
	return false, "waiting for the stall to last"
}

func (p *policy) flip(now time.Time, on bool, why string) {
	p.on, p.since, p.reason, p.pending = on, now, why, time.Time{}
	p.switches++
	p.log.Info("spill switched", "on", on, "reason", why)
}

func (p *policy) state() (bool, time.Time, string, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.on, p.since, p.reason, p.switches
}

func float64bits(f float64) uint64     { return math.Float64bits(f) }
func float64frombits(b uint64) float64 { return math.Float64frombits(b) }

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
