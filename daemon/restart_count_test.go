package daemon

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lastmile/lastmile/engine"
)

// TestRestartDoesNotCountARunTwice: once supervise has added an ended
// run's counters to the job's base, that run is no longer the job's
// current one; a scrape (or GET /v1/jobs/ID) between a restart's two runs
// added the old run's counters a second time (lastmile_rows_total and the
// others jumped up, then fell back when the next run started: counters
// that go back).
func TestRestartDoesNotCountARunTwice(t *testing.T) {
	d := apiDaemon(t, nil)
	abs, _ := filepath.Abs("../testdata/small")
	type seen struct{ base, scraped int64 }
	got := make(chan seen, 1)
	calls := 0
	startHook = func(j *Job) {
		if j.name != "twice" {
			return
		}
		if calls++; calls != 2 { // the first run's start; then the restart's
			return
		}
		v := j.view() // GET /v1/jobs/ID; collectJob adds the same way
		j.mu.Lock()
		s := seen{j.base.rows, v.Progress.Rows}
		j.mu.Unlock()
		select {
		case got <- s:
		default:
		}
	}
	defer func() { startHook = nil }()
	p := peer{uid: uint32(os.Getuid()), gid: uint32(os.Getgid()), ok: true}
	j, _, err := d.submit(context.Background(), p, submitRequest{Spec: "name: twice\ninputs: [" + abs + "]\ncolumns: [row_id]\nbatch: {size: 100}\nepochs: 0\nring: {slots: 4}\n"})
	if err != nil {
		t.Fatal(err)
	}
	defer j.cancel("test over")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		j.mu.Lock()
		r := j.run
		j.mu.Unlock()
		if r != nil && r.prog.Rows.Load() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no rows produced")
		}
	}
	rank, wait := 0, 10.0
	if _, err := j.attach(context.Background(), attachRequest{Rank: &rank, Cursor: &engine.Cursor{Epoch: 0, Batch: 2}, Wait: &wait}); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s.base == 0 || s.scraped != s.base {
			t.Fatalf("between the runs of a restart the job's rows read %d, its ended runs' %d: the ended run counted twice", s.scraped, s.base)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no restart")
	}
}
