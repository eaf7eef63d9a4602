package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/lastmile/lastmile/shm"
)

// TrainerConfig says how a simulated trainer consumes its ring.
type TrainerConfig struct {
	// Step is the mean time of the training step that follows each batch
	// (the GPU's work: the trainer sleeps, using no CPU); 0 takes batches
	// as fast as they come.
	Step time.Duration
	// Dist is how steps are drawn: "fixed" (every step is Step, the
	// default), "exp" (exponential, mean Step) or "uniform" (uniform in
	// [Step/2, 3·Step/2]).
	Dist string
	Seed uint64
}

// ParseDist checks a step distribution's name.
func ParseDist(s string) (string, error) {
	switch s {
	case "", "fixed":
		return "fixed", nil
	case "exp", "uniform":
		return s, nil
	}
	return "", fmt.Errorf("step distribution %q: want fixed, exp or uniform", s)
}

// Trainer is a simulated trainer: it reads a ring with the Go consumer
// as a training loop would (take a batch, train on it for a step, take
// the next) and counts the time it waited on an empty ring. Its counters
// may be read (Snapshot) while Run runs.
type Trainer struct {
	cfg     TrainerConfig
	batches atomic.Int64
	samples atomic.Int64
	waited  atomic.Int64 // ns waited on an empty ring, finished waits
	since   atomic.Int64 // when the wait under way began (UnixNano), 0: none
	ready   atomic.Int64 // ns in Next for batches that were there already
	readyN  atomic.Int64
}

// NewTrainer returns a trainer with cfg (Dist checked by ParseDist).
func NewTrainer(cfg TrainerConfig) *Trainer { return &Trainer{cfg: cfg} }

// TrainerCounts is a trainer's counters at one time.
type TrainerCounts struct {
	At      time.Time
	Batches int64
	Samples int64
	Waited  time.Duration // on an empty ring, the wait under way included
	// ClientNanos and ClientBatches are the time Next took for batches
	// that were waiting in the ring: the client's own cost per batch.
	ClientNanos, ClientBatches int64
}

// Snapshot returns the counters now.
func (t *Trainer) Snapshot() TrainerCounts {
	now := time.Now()
	w := t.waited.Load()
	if s := t.since.Load(); s != 0 {
		w += max(now.UnixNano()-s, 0)
	}
	return TrainerCounts{At: now, Batches: t.batches.Load(), Samples: t.samples.Load(), Waited: time.Duration(w),
		ClientNanos: t.ready.Load(), ClientBatches: t.readyN.Load()}
}

// Window is what a trainer did between two snapshots.
type Window struct {
	Seconds        float64 `json:"seconds"`
	Batches        int64   `json:"batches"`
	Samples        int64   `json:"samples"`
	Rate           float64 `json:"samples_per_s"`
	Stall          float64 `json:"stall"` // share of the window waiting on an empty ring
	ClientPerBatch float64 `json:"client_s_per_batch"`
}

// Between returns the window from a to b.
func Between(a, b TrainerCounts) Window {
	w := Window{Seconds: b.At.Sub(a.At).Seconds(), Batches: b.Batches - a.Batches, Samples: b.Samples - a.Samples}
	if w.Seconds > 0 {
		w.Rate = float64(w.Samples) / w.Seconds
		w.Stall = min(max((b.Waited-a.Waited).Seconds()/w.Seconds, 0), 1)
	}
	if n := b.ClientBatches - a.ClientBatches; n > 0 {
		w.ClientPerBatch = float64(b.ClientNanos-a.ClientNanos) / 1e9 / float64(n)
	}
	return w
}

// Run opens ring dir/name and consumes it until the stream ends (nil) or
// ctx is done (nil too: a measurement stops its trainers so). A producer
// that failed or died ends it with that error, except when ctx is done.
func (t *Trainer) Run(ctx context.Context, dir, name string) error {
	c, err := shm.Open(dir, name)
	if err != nil {
		return fmt.Errorf("simulated trainer: %w", err)
	}
	defer c.Close()
	// The trainer is a goroutine of the measuring process: it must not
	// hold a core in a futex wait (shm.Consumer.SleepWhileEmpty).
	c.SleepWhileEmpty()
	rng := rand.New(rand.NewPCG(t.cfg.Seed, 0x5eed))
	var end time.Time // when the last step ended
	var lastWaits uint64
	timer := time.NewTimer(0)
	<-timer.C
	for {
		start := time.Now()
		t.since.Store(start.UnixNano())
		b, err := c.Next(ctx)
		arrived := time.Now()
		t.since.Store(0)
		d := arrived.Sub(start)
		if err != nil {
			t.waited.Add(int64(d))
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("simulated trainer: %w", err)
		}
		// Next parks (and counts an empty wait) only after spinning on
		// an empty ring: a parked call waited, any other one is the
		// client's own cost.
		waits := c.Stats().EmptyWaits
		parked := waits != lastWaits
		lastWaits = waits
		if parked {
			t.waited.Add(int64(d))
		} else {
			t.ready.Add(int64(d))
			t.readyN.Add(1)
		}
		t.batches.Add(1)
		t.samples.Add(int64(b.Rows))
		if t.cfg.Step <= 0 {
			continue
		}
		// A step that follows a wait starts when the batch came; one that
		// follows a ready batch starts when the last one ended, so that
		// sleeping late does not slow the trainer down.
		from := arrived
		if !parked && !end.IsZero() {
			from = end
		}
		end = from.Add(t.step(rng))
		if s := time.Until(end); s > 0 {
			timer.Reset(s)
			select {
			case <-ctx.Done():
				timer.Stop()
				return nil
			case <-timer.C:
			}
		}
	}
}

func (t *Trainer) step(rng *rand.Rand) time.Duration {
	s := float64(t.cfg.Step)
	switch t.cfg.Dist {
	case "exp":
		s *= rng.ExpFloat64()
	case "uniform":
		s *= 0.5 + rng.Float64()
	}
	return time.Duration(s)
}
