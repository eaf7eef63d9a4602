package main_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestReviewHugeHeadWedgesDaemon: a ring's head word (offset 256) is the
// consumer's, in a file its owner may write. sampleWaits (every 10 ms)
// credits every batch between the head it saw last and the head it reads
// now, one loop iteration per batch (waits.go, rankWaits.sample), holding
// the job's j.mu and the samplers' lock. A trainer that stores 1<<62 there
// sends the sampler into a loop of 2^62 iterations with j.mu held: the
// monitor, GET /v1/status and every submission (holdLocked under d.mu)
// then block on that j.mu, for every user.
func TestReviewHugeHeadWedgesDaemon(t *testing.T) {
	e := newEnv(t)
	e.start()
	j := e.submit(specFor("headjob", smallData, "epochs: 0\n"), nil)
	e.waitJob(j.ID, 20*time.Second, "running")
	ring := filepath.Join(e.shm, "lastmile.headjob")
	time.Sleep(200 * time.Millisecond) // observers open, sampler running
	f, err := os.OpenFile(ring, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], 1<<62)
	if _, err := f.WriteAt(b[:], 256); err != nil {
		t.Fatal(err)
	}
	f.Close()
	time.Sleep(300 * time.Millisecond)
	done := make(chan int, 1)
	go func() {
		st, _ := e.do("GET", "/v1/status", nil, nil)
		done <- st
	}()
	select {
	case st := <-done:
		if st != 200 {
			t.Errorf("status after the head store: %d", st)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("GET /v1/status did not answer within 10 s after a trainer stored head = 1<<62 in its own ring: the daemon is wedged")
	}
}
