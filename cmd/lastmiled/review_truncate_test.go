package main_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestReviewOwnerTruncatesRing: a job's ring file belongs to the job's
// owner (mode 0600, fchown), who opens it read-write to consume it, and so
// may ftruncate it. lastmiled keeps the file mapped and stores into it
// (heartbeat, slots, tail): the next store is a SIGBUS, a fatal runtime
// error, and the daemon dies with every other user's jobs. Here the test
// (root) truncates the ring of a job, as its owner could, while a
// bystander job runs.
func TestReviewOwnerTruncatesRing(t *testing.T) {
	e := newEnv(t)
	e.start()
	bystander := e.submit(specFor("bystander", smallData, "epochs: 0\n"), nil)
	j := e.submit(specFor("trunc", smallData, "epochs: 0\n"), nil)
	ring := filepath.Join(e.shm, "lastmile.trunc")
	waitFor(t, "the ring of job trunc", 20*time.Second, func() bool {
		_, err := os.Stat(ring)
		return err == nil
	})
	e.waitJob(j.ID, 20*time.Second, "running")
	if err := os.Truncate(ring, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-e.cur.done:
		e.cur = nil
		t.Fatalf("lastmiled died after a job owner truncated their own ring file (%v): every user's jobs (here %s) went with it", err, bystander.ID)
	case <-time.After(2 * time.Second):
	}
	if st, err := e.do("GET", "/v1/status", nil, nil); st != 200 {
		t.Fatalf("status after the truncation: %d %v", st, err)
	}
}
