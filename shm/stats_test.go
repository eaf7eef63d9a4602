package shm_test

import (
	"context"
	"testing"
	"time"

	"github.com/lastmile/lastmile/shm"
)

// TestStatsWaitUnderWay: FullWait counts a wait on the full ring while it
// lasts (a trainer that stopped shows as a full ring the producer waits
// on, not as 0 until it comes back), never goes back, and Held counts
// the slots acquired and not yet published.
func TestStatsWaitUnderWay(t *testing.T) {
	ctx := testCtx(t)
	cfg := testConfig(t, "stats", 3)
	p, err := shm.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Remove()
	defer p.Close()
	for seq := uint64(0); seq < 2; seq++ {
		if err := writeBatch(ctx, p, seq); err != nil {
			t.Fatal(err)
		}
	}
	s, err := p.Acquire(ctx) // the third slot, held
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Held != 1 || st.Occupancy() != 2 || st.FullWait != 0 {
		t.Fatalf("stats %+v: want 1 held, 2 published, no wait", st)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := p.Acquire(wctx) // the ring is full: waits
		done <- err
	}()
	time.Sleep(150 * time.Millisecond)
	mid := p.Stats()
	if mid.FullWait < 100*time.Millisecond {
		t.Errorf("FullWait %v while the producer waits for 150ms", mid.FullWait)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("Acquire on a full ring returned a slot")
	}
	end := p.Stats()
	if end.FullWait < mid.FullWait || end.FullWaits != 1 {
		t.Errorf("after the wait: %+v, before its end FullWait %v", end, mid.FullWait)
	}
	p.Discard(s)
	if st := p.Stats(); st.Held != 0 {
		t.Errorf("after Discard: held %d", st.Held)
	}
}
