package daemon

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/engine"
)

// An attach's cursor is the trainer's word: a batch so far past any epoch
// that the rows before it overflow is refused with a 400, not handed to a
// restart that would resume the ring at another place.
func TestAttachCursorPastAnyEpoch(t *testing.T) {
	d := apiDaemon(t, nil)
	abs, _ := filepath.Abs("../testdata/small")
	p := peer{uid: uint32(os.Getuid()), gid: uint32(os.Getgid()), ok: true}
	j, _, err := d.submit(context.Background(), p, submitRequest{Spec: "name: cur\ninputs: [" + abs + "]\ncolumns: [row_id]\nbatch: {size: 100}\nworld_size: 2\nepochs: 0\nring: {slots: 4}\n"})
	if err != nil {
		t.Fatal(err)
	}
	defer j.cancel("test over")
	rank, wait := 1, 5.0
	_, err = j.attach(context.Background(), attachRequest{Rank: &rank, Cursor: &engine.Cursor{Epoch: 3, Batch: 1 << 62}, Wait: &wait})
	var ae *apiError
	if !errors.As(err, &ae) || ae.status != http.StatusBadRequest || !strings.Contains(ae.msg, "past any epoch") {
		t.Fatalf("attach with batch 2^62: %v, want a 400 saying the cursor is past any epoch", err)
	}
	j.mu.Lock()
	st := j.state
	j.mu.Unlock()
	if st.Terminal() {
		t.Errorf("the job is %s after the refused attach", st)
	}
}

// A cancel that comes after supervise looked at stopWhy and before its run
// exists (a DELETE right after the submission) found no run to stop; the
// run then started anyway, and the cancel waited for ever for a job that
// produced into its full ring (a CI hang of TestAttachCursorPastAnyEpoch).
func TestCancelBeforeTheRunStarts(t *testing.T) {
	d := apiDaemon(t, nil)
	abs, _ := filepath.Abs("../testdata/small")
	canceled := make(chan struct{})
	startHook = func(j *Job) {
		if j.name != "early" {
			return
		}
		go func() { j.cancel("canceled early"); close(canceled) }()
		for { // until the cancel's stopRun has looked for a run
			j.mu.Lock()
			why := j.stopWhy
			j.mu.Unlock()
			if why != "" {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	defer func() { startHook = nil }()
	p := peer{uid: uint32(os.Getuid()), gid: uint32(os.Getgid()), ok: true}
	j, _, err := d.submit(context.Background(), p, submitRequest{Spec: "name: early\ninputs: [" + abs + "]\ncolumns: [row_id]\nbatch: {size: 100}\nepochs: 0\nring: {slots: 4}\n"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-canceled:
	case <-time.After(20 * time.Second):
		t.Fatal("the cancel did not return: the run started after it ran on")
	}
	j.mu.Lock()
	st, msg := j.state, j.errMsg
	j.mu.Unlock()
	if st != Canceled || msg != "canceled early" {
		t.Errorf("the job is %s (%s), want canceled", st, msg)
	}
}
