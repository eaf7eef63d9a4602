package daemon

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
	"github.com/prometheus/client_golang/prometheus"
)

// TestEndedRunCountedOnce: once a run has returned, supervise adds its
// counters to the job's base, and j.run keeps pointing at it until the
// next run starts or the job finishes (for ever, when lastmiled drains).
// Meanwhile /metrics and the job's view must count the run once: before,
// they added the ended run's counters to a base that already held them,
// and every counter doubled, then fell back when the next run began.
func TestEndedRunCountedOnce(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.StateDir, cfg.ShmDir, cfg.Socket, cfg.Metrics = filepath.Join(dir, "state"), filepath.Join(dir, "shm"), filepath.Join(dir, "s"), "off"
	d, err := New(cfg, nil, nil, "v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	j := &Job{d: d, id: "j", name: "j", state: Running, spec: &spec.Job{WorldSize: 1}, published: make([]uint64, 1),
		fullWait: make([]time.Duration, 1), emptyWait: make([]atomic.Int64, 1)}
	j.client = d.sched.NewClient(1)
	d.jobs["j"] = j
	p := &engine.Progress{}
	p.Rows.Store(1000)
	p.UnitsDone.Store(4)
	p.UnitsHedged.Store(3)
	j.run = &run{prog: p}

	rows := func() (metric, view int64) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collector{d})
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range mfs {
			if f.GetName() == "lastmile_rows_total" {
				for _, m := range f.GetMetric() {
					metric += int64(m.GetCounter().GetValue())
				}
			}
		}
		return metric, j.view().Progress.Rows
	}
	if m, v := rows(); m != 1000 || v != 1000 {
		t.Fatalf("while the run runs: rows %d in /metrics, %d in the view; want 1000", m, v)
	}
	j.mu.Lock()
	j.foldLocked(j.run) // the run returned; j.run still points at it
	j.mu.Unlock()
	if m, v := rows(); m != 1000 || v != 1000 {
		t.Errorf("after the run returned: rows %d in /metrics, %d in the view; want 1000 (counted once)", m, v)
	}
	if got := j.view().Progress.UnitsHedged; got != 3 {
		t.Errorf("after the run returned: %d units hedged in the view, want 3", got)
	}
}
