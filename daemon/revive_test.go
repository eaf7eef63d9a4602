package daemon

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lastmile/lastmile/engine"
)

func waitState(t *testing.T, j *Job, within time.Duration, want ...State) State {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		j.mu.Lock()
		st, msg := j.state, j.errMsg
		j.mu.Unlock()
		for _, w := range want {
			if st == w {
				return st
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("job is %s (%s), want %v", st, msg, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReviveInFinishWindow: finish sets the state to done under j.mu, lets
// go of it, and only then closes the job's scheduler client. An attach
// that revives the job in between (finishHook stands for that moment)
// finds the client still open, so Reopen does nothing, and finish's Close
// then closes the client of the revived run: every Acquire of the new run
// fails with ErrSchedulerClosed and the revived job fails ("lastmiled:
// ... scheduler client closed"). The scheduler is paused until finish has
// returned so that the new run has decoded nothing before.
func TestReviveInFinishWindow(t *testing.T) {
	d := apiDaemon(t, nil)
	abs, _ := filepath.Abs("../testdata/small")
	attached := make(chan error, 1)
	var revived *Job
	finishHook = func(j *Job) {
		if revived != nil {
			return // the revived run's own finish
		}
		revived = j
		d.sched.Pause()
		j.mu.Lock()
		old := j.run
		j.mu.Unlock()
		rank := 0
		go func() {
			wait := 20.0
			_, err := j.attach(context.Background(), attachRequest{Rank: &rank, Cursor: &engine.Cursor{Epoch: 0, Batch: 2}, Wait: &wait})
			attached <- err
		}()
		// revive has set pending, called Reopen and started the new
		// supervisor, whose run is the job's now.
		deadline := time.Now().Add(20 * time.Second)
		for {
			j.mu.Lock()
			r := j.run
			j.mu.Unlock()
			if r != nil && r != old {
				return
			}
			if time.Now().After(deadline) {
				t.Error("no new run")
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	defer func() { finishHook = nil }()
	p := peer{uid: uint32(os.Getuid()), gid: uint32(os.Getgid()), ok: true}
	j, _, err := d.submit(context.Background(), p, submitRequest{Spec: "name: rv\ninputs: [" + abs + "]\ncolumns: [row_id]\nbatch: {size: 1000}\nring: {slots: 16}\n"})
	if err != nil {
		t.Fatal(err)
	}
	first := j.finishedCh()
	select {
	case <-first: // the first supervisor's finish has returned
	case <-time.After(30 * time.Second):
		t.Fatal("the first run did not end")
	}
	d.sched.Resume()
	err = <-attached
	st := waitState(t, j, 30*time.Second, Done, Failed, Canceled)
	<-j.finishedCh() // its record written: the test's directory may go
	j.mu.Lock()
	msg := j.errMsg
	j.mu.Unlock()
	if st != Done || err != nil {
		t.Fatalf("revived job ended %s (%s); attach: %v", st, msg, err)
	}
}
