package main_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// countsJSON is GET /v1/jobs/{id}/counts.
type countsJSON struct {
	Plan              string
	Hosts, Host       int
	Rows              []int64
	Counted, Complete bool
	State             string
}

// countsOf long-polls a job's counts until this host's share (or every
// count) is there.
func countsOf(t *testing.T, e *env, job string) countsJSON {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var c countsJSON
		if st, err := e.do("GET", "/v1/jobs/"+job+"/counts?wait=5", nil, &c); err != nil || st != 200 {
			t.Fatalf("GET counts: %d %v", st, err)
		}
		if c.Rows != nil {
			return c
		}
	}
	t.Fatal("no counts after 30 s")
	return countsJSON{}
}

// jobCounts is the job view's counts state.
func jobCounts(e *env, job string) string {
	var v struct{ Counts string }
	e.do("GET", "/v1/jobs/"+job, nil, &v)
	return v.Counts
}

// runWorld runs a 4-rank world of spec on two fresh lastmileds, host h
// on envs[h], submitted with share_counts as share says, and returns what
// each rank read; between runs after the submissions, before any rank
// attaches (it relays the counts, when shared).
func runWorld(ctx context.Context, t *testing.T, spec string, share bool, between func(envs []*env, jobs []string)) (map[int][]int64, []*env, []string) {
	t.Helper()
	var readers []*reader
	var envs []*env
	var jobs []string
	for h := range 2 {
		e := newEnv(t)
		e.start()
		j := e.submit(spec, map[string]any{"hosts": 2, "host": h, "share_counts": share})
		envs, jobs = append(envs, e), append(jobs, j.ID)
		readers = append(readers, &reader{e: e, job: j.ID, rank: 2 * h}, &reader{e: e, job: j.ID, rank: 2*h + 1})
	}
	if between != nil {
		between(envs, jobs)
	}
	if err := startReaders(ctx, readers)(); err != nil {
		t.Fatal(err)
	}
	rows := map[int][]int64{}
	for _, r := range readers {
		rows[r.rank] = r.rows
	}
	return rows, envs, jobs
}

const countsSpecExtra = "world_size: 4\nshuffle: {units: true, buffer: 1000}\nseed: 7\npipeline:\n  - filter: \"row_id % 4 != 3\"\n"

// Two lastmileds whose trainers relay their hosts' unit counts (each host
// counting only its share) give every rank exactly the batches of two
// that each count every unit; the daemons refuse counts they can tell are
// wrong, and keep the list they took.
func TestTwoHostsExchangeCounts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	spec := specFor("world", smallData, countsSpecExtra)
	want, _, _ := runWorld(ctx, t, spec, false, nil)
	got, envs, jobs := runWorld(ctx, t, spec, true, func(envs []*env, jobs []string) { relayCounts(t, envs, jobs) })
	if !reflect.DeepEqual(got, want) {
		t.Fatal("ranks fed by hosts that exchanged their counts read other rows than those of hosts that counted alone")
	}
	for h, e := range envs {
		c := countsOf(t, e, jobs[h])
		if !c.Complete || slices.Contains(c.Rows, -1) || jobCounts(e, jobs[h]) != "known" {
			t.Fatalf("host %d after the run: counts %+v, view %q", h, c, jobCounts(e, jobs[h]))
		}
		// The same list again is taken; another is refused.
		if st, _ := e.do("POST", "/v1/jobs/"+jobs[h]+"/counts", map[string]any{"plan": c.Plan, "rows": c.Rows}, nil); st != 200 {
			t.Fatalf("host %d: posting its counts again: %d", h, st)
		}
		c.Rows[0]++
		if st, _ := e.do("POST", "/v1/jobs/"+jobs[h]+"/counts", map[string]any{"plan": c.Plan, "rows": c.Rows}, nil); st != 409 {
			t.Fatalf("host %d: posting other counts after the run: %d, want 409", h, st)
		}
	}
	one := envs[0].submit(strings.Replace(spec, "name: world", "name: one", 1), nil)
	// The counts of 300,000 units outgrow control.max_body (1 MiB): the
	// counts endpoint takes them (and refuses them here for what they say).
	many := make([]int64, 300_000)
	for i := range many {
		many[i] = 1_000_000 // 8 bytes of JSON each: 2.4 MB
	}
	var a struct{ Error string }
	if st, _ := envs[0].do("POST", "/v1/jobs/"+one.ID+"/counts", map[string]any{"plan": "x", "rows": many}, &a); st != 409 {
		t.Fatalf("posting 300,000 counts: %d %q, want 409 (not 413)", st, a.Error)
	}
	for _, m := range []string{"GET", "POST"} {
		var a struct{ Error string }
		if st, _ := envs[0].do(m, "/v1/jobs/"+one.ID+"/counts", map[string]any{"plan": "x", "rows": []int{1}}, &a); st != 409 ||
			!strings.Contains(a.Error, "runs on one host") {
			t.Fatalf("%s the counts of a job of one host: %d %q", m, st, a.Error)
		}
	}
	if st, _ := envs[0].do("POST", "/v1/jobs", map[string]any{"spec": spec, "share_counts": true}, &a); st != 400 ||
		!strings.Contains(a.Error, `"share_counts" needs "hosts" 2 or more`) {
		t.Fatalf("share_counts on one host: %d %q", st, a.Error)
	}
}

// relayCounts does what the trainers do (python/lastmile/hosts.py): wait
// for each host's share, merge them, and post the list to every host,
// after checking that wrong lists are refused.
func relayCounts(t *testing.T, envs []*env, jobs []string) {
	t.Helper()
	var shares []countsJSON
	for h, e := range envs {
		c := countsOf(t, e, jobs[h])
		if c.Complete || c.Host != h || c.Hosts != 2 || !strings.HasPrefix(c.Plan, "sha256:") {
			t.Fatalf("host %d's share: %+v", h, c)
		}
		if s := jobCounts(e, jobs[h]); s != "exchanging" {
			t.Fatalf("host %d's job view: counts %q, want exchanging", h, s)
		}
		var short countsJSON
		if st, _ := e.do("GET", "/v1/jobs/"+jobs[h]+"/counts?rows=0", nil, &short); st != 200 || short.Rows != nil || !short.Counted || !c.Counted {
			t.Fatalf("host %d: counts without rows: %d %+v", h, st, short)
		}
		shares = append(shares, c)
	}
	merged := slices.Clone(shares[0].Rows)
	for i := range merged {
		merged[i] = shares[i%2].Rows[i]
		if merged[i] < 0 || shares[1-i%2].Rows[i] != -1 {
			t.Fatalf("unit %d: host %d counted %d, host %d %d", i, i%2, merged[i], 1-i%2, shares[1-i%2].Rows[i])
		}
	}
	post := func(h int, plan string, rows []int64) (int, string) {
		var a struct{ Error string }
		st, _ := envs[h].do("POST", "/v1/jobs/"+jobs[h]+"/counts", map[string]any{"plan": plan, "rows": rows}, &a)
		return st, a.Error
	}
	own := slices.Clone(merged)
	own[0]++
	uncounted := slices.Clone(merged)
	uncounted[1] = -1
	for _, bad := range []struct {
		plan string
		rows []int64
		code int
		want string
	}{
		{"sha256:0", merged, 409, "but this host planned"},
		{shares[0].Plan, merged[1:], 400, fmt.Sprintf("lists %d units, but the plan has %d", len(merged)-1, len(merged))},
		{shares[0].Plan, uncounted, 400, `"rows"[1] is -1: every unit needs its count (host 1's to count)`},
		{shares[0].Plan, own, 409, "but this host counted"},
	} {
		if st, msg := post(0, bad.plan, bad.rows); st != bad.code || !strings.Contains(msg, bad.want) {
			t.Fatalf("posting %s %v: %d %q, want %d saying %q", bad.plan, bad.rows, st, msg, bad.code, bad.want)
		}
	}
	for h := range envs {
		if st, msg := post(h, shares[h].Plan, merged); st != 200 {
			t.Fatalf("host %d: posting the merged counts: %d %s", h, st, msg)
		}
	}
}

// A host's lastmiled killed with SIGKILL while its trainers relay the
// counts, and started again, loses nothing they gave it: killed after
// they read its share, it counts again and takes the list posted while it
// recounts; killed after they posted, its record holds the list. Every
// rank reads what it reads without the restart.
func TestKill9DuringCountExchange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	spec := specFor("world", smallData, countsSpecExtra)
	want, _, _ := runWorld(ctx, t, spec, false, nil)
	for _, postFirst := range []bool{false, true} {
		got, _, _ := runWorld(ctx, t, spec, true, func(envs []*env, jobs []string) {
			shares := []countsJSON{countsOf(t, envs[0], jobs[0]), countsOf(t, envs[1], jobs[1])}
			merged := slices.Clone(shares[0].Rows)
			for i := range merged {
				merged[i] = shares[i%2].Rows[i]
			}
			post := func(h int) {
				if st, err := envs[h].do("POST", "/v1/jobs/"+jobs[h]+"/counts", map[string]any{"plan": shares[h].Plan, "rows": merged}, nil); st != 200 {
					t.Fatalf("host %d: posting the merged counts: %d %v", h, st, err)
				}
			}
			if postFirst {
				post(0)
			}
			envs[0].kill9()
			envs[0].start()
			if !postFirst {
				post(0)
			}
			post(1)
		})
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("posted before the kill %v: the ranks read other rows than without a restart", postFirst)
		}
	}
}

// Trainers that cannot relay the counts tell each host to count every
// unit itself (count_here): the ranks read what they would have read.
func TestCountHere(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	spec := specFor("world", smallData, countsSpecExtra)
	want, _, _ := runWorld(ctx, t, spec, false, nil)
	got, _, _ := runWorld(ctx, t, spec, true, func(envs []*env, jobs []string) {
		for h, e := range envs {
			var a struct{ Error string }
			if st, _ := e.do("POST", "/v1/jobs/"+jobs[h]+"/counts", map[string]any{"count_here": true, "rows": []int{1}}, &a); st != 400 ||
				!strings.Contains(a.Error, `"count_here" goes alone`) {
				t.Fatalf("host %d: count_here with rows: %d %q", h, st, a.Error)
			}
			if st, err := e.do("POST", "/v1/jobs/"+jobs[h]+"/counts", map[string]any{"count_here": true}, nil); st != 200 {
				t.Fatalf("host %d: count_here: %d %v", h, st, err)
			}
		}
	})
	if !reflect.DeepEqual(got, want) {
		t.Fatal("hosts told to count every unit gave other rows than hosts that counted alone from the start")
	}
}
