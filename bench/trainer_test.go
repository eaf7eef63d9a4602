package bench

import (
	"context"
	"testing"
	"time"

	"github.com/lastmile/lastmile/shm"
)

// produce publishes a batch of 100 rows every gap until n are out, then
// ends the stream.
func produce(ctx context.Context, t *testing.T, p *shm.Producer, n int, gap time.Duration) {
	data := make([]byte, 100*4)
	for i := 0; i < n; i++ {
		s, err := p.Acquire(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		if err := s.SetRows(100); err != nil {
			t.Error(err)
			return
		}
		if err := s.AddTensor(0, shm.RoleDense, shm.Float32, data, 100); err != nil {
			t.Error(err)
			return
		}
		if err := p.Publish(s); err != nil {
			t.Error(err)
			return
		}
		time.Sleep(gap)
	}
	p.Close()
}

// TestTrainerStall: a trainer faster than its producer spends most of
// its time waiting on the empty ring; one slower than its producer
// (batches wait in the ring) hardly waits, and takes the rate its step
// time gives. A rate's upper bound is what the producer's gap or the
// step allows (a sleep never ends early: 5,000 and 10,000 rows/s); its
// lower bound is a fifth of that, as a loaded CI machine oversleeps
// (1,743 rows/s were seen starved, where a quiet one gives 4,900).
func TestTrainerStall(t *testing.T) {
	tests := []struct {
		name             string
		gap, step        time.Duration
		minStall, maxSt  float64
		minRate, maxRate float64
	}{
		{"starved: producer every 20ms, no step", 20 * time.Millisecond, 0, 0.8, 1, 1000, 7000},
		{"fed: producer at once, 10ms steps", 0, 10 * time.Millisecond, 0, 0.1, 2000, 10500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			dir := t.TempDir()
			p, err := shm.Create(shm.Config{Dir: dir, Name: "tr", Slots: 4, SlotSize: 8192,
				Fields: []shm.Field{{Name: "x", Kind: shm.Dense, DType: shm.Float32}}})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Remove()
			tr := NewTrainer(TrainerConfig{Step: tc.step, Dist: "fixed"})
			done := make(chan error, 1)
			go func() { done <- tr.Run(ctx, dir, "tr") }()
			go produce(ctx, t, p, 60, tc.gap)
			time.Sleep(100 * time.Millisecond)
			a := tr.Snapshot()
			time.Sleep(400 * time.Millisecond)
			w := Between(a, tr.Snapshot())
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if w.Stall < tc.minStall || w.Stall > tc.maxSt || w.Rate < tc.minRate || w.Rate > tc.maxRate {
				t.Errorf("stall %.3f, %.0f samples/s; want stall in [%g, %g], rate in [%g, %g]", w.Stall, w.Rate, tc.minStall, tc.maxSt, tc.minRate, tc.maxRate)
			}
		})
	}
	if _, err := ParseDist("zipf"); err == nil {
		t.Error("ParseDist(zipf): no error")
	}
}

// TestCPULimit: the limit can be set, changed and lifted, whichever way
// this host allows.
func TestCPULimit(t *testing.T) {
	for _, how := range []string{"", "affinity"} {
		t.Run("LASTMILE_CPULIMIT="+how, func(t *testing.T) {
			t.Setenv("LASTMILE_CPULIMIT", how)
			l, err := NewCPULimit()
			if err != nil {
				t.Fatal(err)
			}
			if how == "affinity" && l.Method() != "sched_setaffinity" {
				t.Errorf("method %q, want sched_setaffinity", l.Method())
			}
			for _, c := range []float64{1, 0.5, 0} {
				if err := l.Set(c); err != nil {
					t.Errorf("Set(%g) with %s: %v", c, l.Method(), err)
				}
			}
			if err := l.Close(); err != nil {
				t.Errorf("Close with %s: %v", l.Method(), err)
			}
		})
	}
}
