package daemon

import (
	"testing"
	"time"
)

// TestReviewWaitsHugeHead: rankWaits.sample credits one batch per loop
// iteration from the last head to the head read from the ring, a word the
// ring's owner may write. A head of 1<<62 is 2^62 iterations, run by
// sampleWaits with the job's j.mu held (see
// cmd/lastmiled TestReviewHugeHeadWedgesDaemon for the daemon wedged).
func TestReviewWaitsHugeHead(t *testing.T) {
	var w rankWaits
	w.sample(nil, 5, false, 10*time.Millisecond)
	done := make(chan struct{})
	go func() {
		w.sample(nil, 1<<62, false, 10*time.Millisecond)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("rankWaits.sample with a head of 1<<62 (written by the ring's consumer) did not return within 2 s: one iteration per batch")
	}
}
