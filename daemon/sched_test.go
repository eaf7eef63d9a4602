package daemon

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestSchedulerWeights: two clients that always have waiting workers get
// token time in proportion to their weights.
func TestSchedulerWeights(t *testing.T) {
	s := NewScheduler(2)
	a, b := s.NewClient(1), s.NewClient(3)
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range []*Client{a, b} {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					release, err := c.Acquire(ctx)
					if err != nil {
						return
					}
					time.Sleep(2 * time.Millisecond)
					release()
				}
			}()
		}
	}
	wg.Wait()
	sa, sb := a.Stats(), b.Stats()
	ratio := float64(sb.HoldTime) / float64(sa.HoldTime)
	t.Logf("grants %d / %d, hold %v / %v: ratio %.2f", sa.Grants, sb.Grants, sa.HoldTime, sb.HoldTime, ratio)
	if ratio < 2.7 || ratio > 3.3 {
		t.Errorf("hold time ratio %.2f, want 3 ± 10%%", ratio)
	}
}

// TestSchedulerReopen: a closed client refuses, and reopened it is granted
// tokens again with its counters kept.
func TestSchedulerReopen(t *testing.T) {
	s := NewScheduler(1)
	c := s.NewClient(1)
	ctx := context.Background()
	release, err := c.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	release()
	c.Close()
	if _, err := c.Acquire(ctx); err != ErrSchedulerClosed {
		t.Fatalf("closed client: %v, want ErrSchedulerClosed", err)
	}
	c.Reopen()
	c.Reopen() // twice is once
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	release, err = c.Acquire(ctx)
	if err != nil {
		t.Fatalf("reopened client: %v", err)
	}
	release()
	if g := c.Stats().Grants; g != 2 {
		t.Errorf("%d grants counted, want 2 (the counters kept)", g)
	}
}
