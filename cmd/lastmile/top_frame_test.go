package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lastmile/lastmile/peer"
)

// topSamples are two realistic samples one second apart: two jobs of two
// ranks with long names, one whose trainers are the slower side (rank 0's
// ring full for production: 3 published + 1 held of 4, and production
// waiting on it the whole second), one starving; a CPU peer.
func topSamples(t *testing.T) (prev, cur *topSample) {
	t.Helper()
	at := time.Date(2026, 11, 25, 23, 4, 22, 0, time.UTC)
	sample := func(dt time.Duration, k float64) *topSample {
		st := &apiStatus{Version: "v0.9.1-23-gabcdef0-dirty", PID: 2328612, UptimeSeconds: 86400*12 + 1039}
		st.CPU.Busy, st.CPU.Workers = 16, 16
		st.Memory.Reserved, st.Memory.Total = 782<<20+123456, 118<<30+1
		st.Jobs.Running, st.Jobs.Pending = 2, 11
		st.Peers = &apiStatusPeers{Peers: []peer.PeerStats{{Addr: "10.20.30.40:7941", Healthy: true, InFlight: 12,
			Units: int64(100 * k), Bytes: int64(9e8 * k), WireBytes: int64(3.5e8 * k)}}}
		ring := func(rank, occ, held int, next int) apiRing {
			return apiRing{Rank: rank, State: "running", Slots: 4, Occupancy: occ, Held: held, ConsumerAttached: true,
				Next: &apiCursor{Epoch: 12, Batch: uint64(next)}}
		}
		jobs := []apiJob{
			{ID: "adafa7694b18", Name: "small-eval-with-a-rather-long-name", State: "running",
				Rings: []apiRing{ring(0, 3, 1, 123456), ring(1, 3, 0, 123456)}},
			{ID: "abecf1437a79", Name: "ctr-top", State: "running",
				Rings: []apiRing{ring(0, 0, 1, 2047), ring(1, 0, 1, 2047)}},
		}
		var m promSamples
		add := func(name, id, rank string, v float64) {
			l := map[string]string{"job_id": id}
			if rank != "" {
				l["rank"] = rank
			}
			m = append(m, promSample{name: name, labels: l, value: v})
		}
		add(mRows, "adafa7694b18", "", 4450*k)
		add(mBytes, "adafa7694b18", "", 5e5*k)
		add(mRows, "abecf1437a79", "", 1712345*k)
		add(mBytes, "abecf1437a79", "", 1626e6*k)
		for _, r := range []string{"0", "1"} {
			add(mBatches, "adafa7694b18", r, 10*k)
			add(mBatches, "abecf1437a79", r, 400*k)
			add(mEmptyWait, "abecf1437a79", r, 0.2*k)
			add(mEmptyWait, "adafa7694b18", r, 0)
			add(mFullWait, "abecf1437a79", r, 0)
		}
		add(mFullWait, "adafa7694b18", "0", 1*k) // production waited on rank 0 all along
		add(mFullWait, "adafa7694b18", "1", 0)
		add(mUnits, "adafa7694b18", "", 0)
		add(mUnits, "abecf1437a79", "", 16)
		add(mErrors, "adafa7694b18", "", 0)
		add(mErrors, "abecf1437a79", "", 1234)
		return &topSample{at: at.Add(dt), status: st, jobs: jobs, metrics: m}
	}
	return sample(0, 1000), sample(time.Second, 1001)
}

// TestTopFrameFits: a realistic frame fits 80 columns, and FULL agrees
// with the ring fill shown: the rank production waits on shows a ring
// full for production (3+1/4) and FULL 100%, and its job the time
// production waited (the ranks' sum).
func TestTopFrameFits(t *testing.T) {
	prev, cur := topSamples(t)
	var out bytes.Buffer
	if err := buildFrame(prev, cur, false).write(&out, false); err != nil {
		t.Fatal(err)
	}
	frame := out.String()
	for _, l := range strings.Split(frame, "\n") {
		if n := utf8.RuneCountInString(l); n > topWidth {
			t.Errorf("line of %d columns: %q", n, l)
		}
	}
	rows := map[string][]string{}
	job := ""
	for _, l := range strings.Split(frame, "\n") {
		f := strings.Fields(l)
		switch {
		case strings.HasPrefix(l, "small-"):
			job = "small"
			rows[job] = f
		case strings.HasPrefix(l, "ctr-top"):
			job = "ctr"
			rows[job] = f
		case strings.HasPrefix(l, "  rank "):
			rows[job+f[1]] = f
		}
	}
	if r := rows["small0"]; len(r) < 8 || r[5] != "3+1/4" || r[7] != "100%" {
		t.Errorf("rank 0 of small-eval: %q: want RING 3+1/4 and FULL 100%%\n%s", r, frame)
	}
	if r := rows["small1"]; len(r) < 8 || r[5] != "3/4" || r[7] != "0%" {
		t.Errorf("rank 1 of small-eval: %q: want RING 3/4 and FULL 0%%\n%s", r, frame)
	}
	if r := rows["ctr0"]; len(r) < 8 || r[5] != "0+1/4" || r[6] != "20%" {
		t.Errorf("rank 0 of ctr-top: %q: want RING 0+1/4 and STALL 20%%\n%s", r, frame)
	}
	if !strings.Contains(frame, "(adafa7)") || !strings.Contains(frame, "small-") {
		t.Errorf("the job's label lost its name or id:\n%s", frame)
	}
	if s := rows["small"]; len(s) < 6 || s[len(s)-3] != "100%" {
		t.Errorf("small-eval's row %q: want FULL 100%% (production waited all along)\n%s", s, frame)
	}
	t.Logf("\n%s", frame)
}
