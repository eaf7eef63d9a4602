package main_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHugeHeadDoesNotWedgeDaemon: a ring's head word (offset 256) is the
// consumer's, in a file its owner may write. sampleWaits (every 10 ms)
// reads it holding the job's j.mu and the samplers' lock; a trainer that
// stores 1<<62 there must not send it into a loop of one step per batch,
// which would block the monitor, GET /v1/status and every submission
// (holdLocked under d.mu) for every user. A head beyond the tail is
// ignored by the sampler, and fails that job's run only.
func TestHugeHeadDoesNotWedgeDaemon(t *testing.T) {
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
		// Only that job fails, saying why.
		if f := e.waitJob(j.ID, 20*time.Second, "failed"); !strings.Contains(f.Error, "protocol violation") {
			t.Errorf("the job whose consumer's head passed its tail failed with %q, want a protocol violation", f.Error)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("GET /v1/status did not answer within 10 s after a trainer stored head = 1<<62 in its own ring: the daemon is wedged")
	}
}
