package daemon

import (
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestAdviceView: the stall of each rank over the window, the cores the
// job held, its headroom and the advice in words, from two samples.
func TestAdviceView(t *testing.T) {
	t0 := time.Unix(1000, 0)
	sample := func(at time.Duration, held time.Duration, waited ...time.Duration) adviceSample {
		s := adviceSample{at: t0.Add(at), held: held}
		for _, w := range waited {
			s.waited = append(s.waited, int64(w))
		}
		return s
	}
	tests := []struct {
		name      string
		ss        []adviceSample
		peerCores int
		stall     []float64
		cores     float64
		more      int
		peers     int
		advice    string
	}{
		{"starved rank 1", []adviceSample{sample(0, 0, 0, 0), sample(10*time.Second, 20*time.Second, time.Second, 5*time.Second)}, 0,
			[]float64{0.1, 0.5}, 2, 2, 0, "rank 1 waited 50% of the last 10s: about 2 more cores"},
		{"with peers", []adviceSample{sample(0, 0, 0), sample(10*time.Second, 40*time.Second, 3*time.Second)}, 4,
			[]float64{0.3}, 4, 2, 1, "rank 0 waited 30% of the last 10s: about 2 more cores or 1 peer"},
		{"held back by a slow rank", []adviceSample{{at: t0, waited: []int64{0, 0}, full: []int64{0, 0}},
			{at: t0.Add(10 * time.Second), held: 10 * time.Second, waited: []int64{int64(4 * time.Second), 0}, full: []int64{0, int64(3 * time.Second)}}}, 0,
			[]float64{0.4, 0}, 1, 0, 0, "rank 0 waited 40% of the last 10s, but production waited 30% of the window on rank 1's full ring: that trainer is slower than the others and holds every rank back; more CPU would not help"},
		{"held back by a rank nobody reads", []adviceSample{{at: t0, waited: []int64{0, 0}, full: []int64{0, 0}},
			{at: t0.Add(10 * time.Second), held: 10 * time.Second, waited: []int64{int64(4 * time.Second), 0}, full: []int64{0, int64(3 * time.Second)}, unread: []bool{false, true}}}, 0,
			[]float64{0.4, 0}, 1, 0, 0, "rank 0 waited 40% of the last 10s, but production waited 30% of the window on rank 1's full ring, which no trainer reads: start rank 1's trainer (every rank of the job's world_size must read: ranks get equal batches), or give the job the world size of the trainers that run"},
		{"a starving rank's own bursts are not a slow rank", []adviceSample{{at: t0, waited: []int64{0}, full: []int64{0}},
			{at: t0.Add(10 * time.Second), held: 10 * time.Second, waited: []int64{int64(5 * time.Second)}, full: []int64{int64(9 * time.Second)}}}, 0,
			[]float64{0.5}, 1, 1, 0, "rank 0 waited 50% of the last 10s: about 1 more core"},
		{"fed", []adviceSample{sample(0, 0, 0), sample(10*time.Second, 10*time.Second, 100*time.Millisecond)}, 0,
			[]float64{0.01}, 1, 0, 0, "fed: no rank waited more than 5% of the last 10s; about 88% of its CPU unused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := &Job{}
			tr := adviceTracker{m: map[*Job][]adviceSample{j: tc.ss}}
			v := tr.view(j, 8, tc.peerCores)
			if v == nil {
				t.Fatal("no advice")
			}
			for r, s := range tc.stall {
				if d := v.Stall[r] - s; d > 1e-9 || d < -1e-9 {
					t.Errorf("rank %d stall %g, want %g", r, v.Stall[r], s)
				}
			}
			if v.Cores != tc.cores || v.MoreCores != tc.more || v.Peers != tc.peers || v.Advice != tc.advice {
				t.Errorf("cores %g, more %d, peers %d, %q; want %g, %d, %d, %q", v.Cores, v.MoreCores, v.Peers, v.Advice, tc.cores, tc.more, tc.peers, tc.advice)
			}
		})
	}
	if v := (&adviceTracker{}).view(&Job{}, 8, 0); v != nil {
		t.Errorf("advice without samples: %+v", v)
	}
}

// TestAdviceWindow: samples older than the window go, but for one at or
// before its start, and the spill signal is the last few seconds' stall.
func TestAdviceWindow(t *testing.T) {
	var tr adviceTracker
	j := &Job{state: Running}
	j.emptyWait = make([]atomic.Int64, 1)
	t0 := time.Unix(1000, 0)
	for i := 0; i <= 400; i++ {
		if i > 370 {
			j.emptyWait[0].Add(int64(time.Second)) // the last 30 s: all waiting
		}
		tr.sample([]*Job{j}, t0.Add(time.Duration(i)*time.Second))
	}
	ss := tr.m[j]
	if first := ss[0].at.Sub(t0); first != 100*time.Second || len(ss) != 301 {
		t.Errorf("kept %d samples from %v, want 301 from 100s", len(ss), first)
	}
	if s, _ := worstSince(ss, t0.Add(400*time.Second-spillWindow)); s != 1 {
		t.Errorf("stall over the spill window %g, want 1", s)
	}
	v := tr.view(j, 2, 0)
	if !strings.HasPrefix(v.Advice, "rank 0 waited 10% of the last 5m0s") {
		t.Errorf("advice %q", v.Advice)
	}
}

// TestAdviceCollector: the advice gauges of a job.
func TestAdviceCollector(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.StateDir, cfg.ShmDir, cfg.Socket, cfg.Metrics = filepath.Join(dir, "state"), filepath.Join(dir, "shm"), filepath.Join(dir, "s"), "off"
	d, err := New(cfg, nil, nil, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	j := &Job{d: d, id: "a", name: "starve"}
	d.jobs["a"] = j
	t0 := time.Now()
	d.advice.m = map[*Job][]adviceSample{j: {{at: t0, waited: []int64{0}}, {at: t0.Add(10 * time.Second), waited: []int64{int64(5 * time.Second)}, held: 10 * time.Second}}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(adviceCollector{d})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range mfs {
		for _, m := range f.GetMetric() {
			got[f.GetName()] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{"lastmile_rank_stall_ratio": 0.5, "lastmile_job_advice_more_cores": 1,
		"lastmile_job_advice_peers": 0, "lastmile_job_headroom_ratio": 1 - 1.0/float64(d.Config().Workers)}
	for name, v := range want {
		if g, ok := got[name]; !ok || g-v > 1e-9 || v-g > 1e-9 {
			t.Errorf("%s = %v (%v), want %v", name, g, ok, v)
		}
	}
}
