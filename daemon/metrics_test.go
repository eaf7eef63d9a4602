package daemon

import (
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lastmile/lastmile/ops"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestRankWaits: a wait is one run of waiting samples, credited to the
// batch whose arrival ended it; every other batch consumed waited 0; a new
// ring starts over.
func TestRankWaits(t *testing.T) {
	const every = 10 * time.Millisecond
	var w rankWaits
	// head, waiting at each sample
	steps := []struct {
		head    uint64
		waiting bool
	}{
		{0, true}, {0, true}, {0, true}, // 30ms for batch 0
		{0, false}, {2, false}, // batch 0 (credited) and 1 (0) released
		{2, true}, {2, false}, {5, false}, // 10ms for batch 2, then 3 and 4 with no wait
		{5, true}, // a wait under way: not observed yet
	}
	for _, s := range steps {
		w.sample(nil, s.head, s.waiting, every)
	}
	n, sum, b := w.histogram()
	if n != 5 {
		t.Errorf("count %d, want 5 batches", n)
	}
	if sum < 0.0399 || sum > 0.0401 {
		t.Errorf("sum %v, want 0.04", sum)
	}
	for ub, want := range map[float64]uint64{0: 3, 0.01: 4, 0.02: 4, 0.05: 5, 30: 5} {
		if b[ub] != want {
			t.Errorf("bucket le=%v: %d, want %d", ub, b[ub], want)
		}
	}
	// Head going back (a ring made anew) starts over, keeping the counts.
	w.sample(nil, 1, false, every)
	w.sample(nil, 2, false, every)
	if n2, _, _ := w.histogram(); n2 != 6 {
		t.Errorf("after a new ring: count %d, want 6", n2)
	}
}

// TestCollector: build info; a job's memory gauge is its charge, 0 once it
// ended failed or canceled or its rings are gone, and the gauges add up to
// lastmile_memory_reserved_bytes; the per-batch wait histogram per rank;
// rows in and out per op, added up over the job's runs.
func TestCollector(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.StateDir, cfg.ShmDir, cfg.Socket, cfg.Metrics = filepath.Join(dir, "state"), filepath.Join(dir, "shm"), filepath.Join(dir, "s"), "off"
	d, err := New(cfg, nil, nil, "v1.2.3", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{}
	for _, c := range []struct {
		id      string
		state   State
		removed bool
		charged bool
	}{
		{"run", Running, false, true}, {"done", Done, false, true}, {"gone", Done, true, false},
		{"fail", Failed, false, true}, {"cancel", Canceled, true, false},
	} {
		j := &Job{d: d, id: c.id, name: c.id, state: c.state, removed: c.removed, footprint: 1000,
			published: make([]uint64, 1), fullWait: make([]time.Duration, 1), emptyWait: make([]atomic.Int64, 1)}
		j.client = d.sched.NewClient(1)
		d.jobs[c.id] = j
		want[c.id] = 0
		if c.charged {
			want[c.id] = 1000
		}
	}
	d.jobs["run"].addOpRowsLocked([]ops.OpRows{{Op: "pipeline[1].sample", Line: 9, In: 1000, Out: 100}})
	d.jobs["run"].addOpRowsLocked([]ops.OpRows{{Op: "pipeline[1].sample", Line: 9, In: 500, Out: 60}})
	d.jobs["run"].base.latePages, d.jobs["run"].base.lateUnread, d.jobs["run"].base.lateUnreadBytes = 40, 70, 12345
	d.jobs["run"].base.arenaUnits, d.jobs["run"].base.arenaHeap = 30, 2
	d.jobs["run"].base.rowsRuledOut = 917504
	w := rankWaits{}
	w.sample(nil, 0, true, 20*time.Millisecond)
	w.sample(nil, 1, false, 20*time.Millisecond)
	d.waits.m = map[*Job][]rankWaits{d.jobs["run"]: {w}}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{d})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	fams := map[string]*dto.MetricFamily{}
	for _, f := range mfs {
		fams[f.GetName()] = f
	}
	label := func(m *dto.Metric, name string) string {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
		return ""
	}
	bi := fams["lastmile_build_info"]
	if bi == nil || len(bi.Metric) != 1 || label(bi.Metric[0], "version") != "v1.2.3" ||
		label(bi.Metric[0], "goversion") != runtime.Version() || bi.Metric[0].GetGauge().GetValue() != 1 {
		t.Errorf("lastmile_build_info: %v", bi)
	}
	var total float64
	for _, m := range fams["lastmile_job_memory_bytes"].GetMetric() {
		id := label(m, "job_id")
		if got := m.GetGauge().GetValue(); got != want[id] {
			t.Errorf("lastmile_job_memory_bytes of the %s job: %v, want %v", id, got, want[id])
		}
		total += m.GetGauge().GetValue()
	}
	if r := fams["lastmile_memory_reserved_bytes"].GetMetric()[0].GetGauge().GetValue(); r != total {
		t.Errorf("lastmile_memory_reserved_bytes %v, the jobs' gauges add up to %v", r, total)
	}
	for name, v := range map[string]float64{"lastmile_op_rows_in_total": 1500, "lastmile_op_rows_out_total": 160} {
		f := fams[name]
		if f == nil || len(f.Metric) != 1 || label(f.Metric[0], "op") != "pipeline[1].sample" || f.Metric[0].GetCounter().GetValue() != v {
			t.Errorf("%s: %v, want %v for pipeline[1].sample", name, f, v)
		}
	}
	for _, m := range fams["lastmile_rows_ruled_out_total"].GetMetric() {
		if want := map[string]float64{"run": 917504}[label(m, "job_id")]; m.GetCounter().GetValue() != want {
			t.Errorf("lastmile_rows_ruled_out_total of job %s: %v, want %v", label(m, "job_id"), m.GetCounter().GetValue(), want)
		}
	}
	if len(fams["lastmile_rows_ruled_out_total"].GetMetric()) == 0 {
		t.Error("no lastmile_rows_ruled_out_total")
	}
	late := map[string]float64{}
	for _, m := range fams["lastmile_late_pages_total"].GetMetric() {
		late[label(m, "job_id")+"/"+label(m, "outcome")] = m.GetCounter().GetValue()
	}
	if late["run/read"] != 40 || late["run/unread"] != 70 || late["done/unread"] != 0 {
		t.Errorf("lastmile_late_pages_total by job and outcome %v, want run/read 40 and run/unread 70", late)
	}
	for _, m := range fams["lastmile_late_unread_bytes_total"].GetMetric() {
		if want := map[bool]float64{true: 12345}[label(m, "job_id") == "run"]; m.GetCounter().GetValue() != want {
			t.Errorf("lastmile_late_unread_bytes_total of %s: %v, want %v", label(m, "job_id"), m.GetCounter().GetValue(), want)
		}
	}
	arena := map[string]float64{}
	for _, m := range fams["lastmile_arena_units_total"].GetMetric() {
		arena[label(m, "job_id")+"/"+label(m, "place")] = m.GetCounter().GetValue()
	}
	if arena["run/arena"] != 30 || arena["run/heap"] != 2 || arena["done/arena"] != 0 || len(arena) != 10 {
		t.Errorf("lastmile_arena_units_total by job and place %v, want run/arena 30 and run/heap 2", arena)
	}
	if n := len(fams["lastmile_late_fetch_deferred"].GetMetric()); n != 5 {
		t.Errorf("lastmile_late_fetch_deferred: %d series, want one a job", n)
	}
	got := map[string]uint64{}
	for _, m := range fams["lastmile_consumer_batch_wait_seconds"].GetMetric() {
		got[label(m, "job_id")] = m.GetHistogram().GetSampleCount()
	}
	if got["run"] != 1 || got["fail"] != 0 || len(got) != 5 {
		t.Errorf("lastmile_consumer_batch_wait_seconds counts by job %v, want run: 1, the others 0", got)
	}
}

// TestRankWaitsHugeHead: the head read from the ring is a word the ring's
// owner may write. rankWaits.sample credits the batches released since the
// last sample arithmetically: a head of 1<<62 must not be 2^62 loop
// iterations run by sampleWaits with the job's j.mu held (see
// cmd/lastmiled TestHugeHeadDoesNotWedgeDaemon).
func TestRankWaitsHugeHead(t *testing.T) {
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
	if n, _, b := w.histogram(); n != 1<<62 || b[0] != 1<<62 {
		t.Errorf("after heads 5 and 1<<62: %d batches, %d of them waited 0; want 1<<62 each", n, b[0])
	}
}
