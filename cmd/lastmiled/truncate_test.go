package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A job's ring file belongs to the job's owner (mode 0600, fchown), who
// opens it read-write to consume it, and so may ftruncate it. lastmiled
// keeps the file mapped and stores into it (heartbeat, slots, tail): each
// store past the new end is a SIGBUS, which used to kill the daemon with
// every other user's jobs. Now only that job fails, saying why. Here the
// test (root) truncates the ring of a job, as its owner could, while a
// bystander job runs.
//
// The unit arena (ring.arena) is the job owner's too, and decode workers
// write into it: the daemon survives that as well. Whether the job then
// fails depends on whether it touches the arena again (a producer waiting
// on a full ring does not); decode.TestFaultIntoMappedColumnIsNotCorruptFile
// and shm.TestTruncatedRingFailsOnlyItsProducer cover the faults.
func TestOwnerTruncatesRing(t *testing.T) {
	for _, c := range []struct {
		name, spec, file string
		mustFail         bool
	}{
		{"ring", specFor("trunc", smallData, "epochs: 0\n"), "lastmile.trunc", true},
		{"arena", fmt.Sprintf("name: trunc\ninputs: [%s]\ncolumns: [row_id]\nbatch: {size: 100}\nepochs: 0\n"+
			"ring: {slots: 4, arena: true}\n", smallData), "arena+*", false},
	} {
		t.Run(c.name, func(t *testing.T) { truncateUnder(t, c.spec, c.file, c.mustFail) })
	}
}

func truncateUnder(t *testing.T, spec, file string, mustFail bool) {
	e := newEnv(t)
	e.start()
	bystander := e.submit(specFor("bystander", smallData, "epochs: 0\n"), nil)
	j := e.submit(spec, nil)
	var path string
	waitFor(t, "the file "+file+" of job trunc", 20*time.Second, func() bool {
		m, _ := filepath.Glob(filepath.Join(e.shm, file))
		if len(m) == 1 {
			path = m[0]
		}
		return len(m) == 1
	})
	e.waitJob(j.ID, 20*time.Second, "running")
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-e.cur.done:
		e.cur = nil
		t.Fatalf("lastmiled died after a job owner truncated their own ring file (%v): every user's jobs (here %s) went with it", err, bystander.ID)
	case <-time.After(2 * time.Second):
	}
	if mustFail {
		e.waitJob(j.ID, 20*time.Second, "failed")
	}
	if got := e.job(j.ID); got.State == "failed" && !strings.Contains(got.Error, "truncated") {
		t.Errorf("job trunc failed with %q, want an error saying its file was truncated", got.Error)
	} else if got.State != "failed" && got.State != "running" {
		t.Errorf("job trunc is %s (%s), want failed or running", got.State, got.Error)
	}
	if b := e.job(bystander.ID); b.State != "running" {
		t.Errorf("the bystander job is %s (%s), want running", b.State, b.Error)
	}
	if st, err := e.do("GET", "/v1/status", nil, nil); st != 200 {
		t.Fatalf("status after the truncation: %d %v", st, err)
	}
}
