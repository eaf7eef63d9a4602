package main_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Two lastmileds, each serving one host's share of a 4-rank world
// (torchrun --nnodes 2 --nproc-per-node 2): each makes rings for its own
// ranks only, refuses the other host's, and every rank of the world gets
// the same batches per epoch, each row at most once.
func TestTwoHostsShareAWorld(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	spec := specFor("world", smallData, "world_size: 4\nshuffle: {units: true, buffer: 1000}\nseed: 7\n"+
		"pipeline:\n  - filter: \"row_id % 4 != 3\"\n")
	spec = strings.Replace(spec, "columns: [row_id]\n", "", 1)
	var readers []*reader
	var digests []string
	for h := range 2 {
		e := newEnv(t)
		e.start()
		j := e.submit(spec, map[string]any{"hosts": 2, "host": h})
		if j.WorldSize != 4 || j.Hosts != 2 || j.Host != h {
			t.Fatalf("host %d: world size %d, host %d of %d; want 4, %d of 2", h, j.WorldSize, j.Host, j.Hosts, h)
		}
		digests = append(digests, j.PlanDigest)
		if h == 0 {
			// The whole world on one host has twice the rings.
			whole := e.submit(strings.Replace(spec, "name: world", "name: whole", 1), nil)
			if j.Memory <= 0 || whole.Memory <= j.Memory {
				t.Fatalf("a host's share is charged %d bytes, the whole world %d", j.Memory, whole.Memory)
			}
			e.do("DELETE", "/v1/jobs/"+whole.ID, nil, nil)
		}
		other := 2 * (1 - h)
		var a struct{ Error string }
		if st, _ := e.do("POST", "/v1/jobs/"+j.ID+"/attach", map[string]any{"rank": other}, &a); st != 400 ||
			!strings.Contains(a.Error, "runs on another host") {
			t.Fatalf("host %d, attaching rank %d: status %d %q", h, other, st, a.Error)
		}
		readers = append(readers, &reader{e: e, job: j.ID, rank: 2 * h}, &reader{e: e, job: j.ID, rank: 2*h + 1})
	}
	if !strings.HasPrefix(digests[0], "sha256:") || digests[0] != digests[1] {
		t.Fatalf("the hosts' plan digests are %q and %q, want one sha256", digests[0], digests[1])
	}
	for _, bad := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"hosts": 2, "host": 2}, `"host" 2: want 0 to 1`},
		{map[string]any{"hosts": 3, "host": 0}, "world size 4 does not split evenly between 3 hosts"},
		{map[string]any{"host": 1}, `"host" 1: want 0 to 0`},
	} {
		bad.body["spec"] = spec
		var a struct{ Error string }
		if st, _ := readers[0].e.do("POST", "/v1/jobs", bad.body, &a); st != 400 || !strings.Contains(a.Error, bad.want) {
			t.Errorf("submit %v: status %d %q, want 400 saying %q", bad.body, st, a.Error, bad.want)
		}
	}
	// gpu.devices lists one GPU per rank of a host.
	for _, tc := range []struct {
		devices string
		hosts   int
		want    string
	}{
		{"[0, 1]", 1, "gpu.devices lists 2 GPUs for world_size 4 on one host"},
		{"[0, 1, 2, 3]", 2, "gpu.devices lists 4 GPUs, but each of the 2 hosts runs 2 ranks of world_size 4"},
		{"[0, 1, 2]", 2, "lists 3 GPUs for world_size 4: give one per rank"},
		{"[0, 1]", 2, ""},
	} {
		text := strings.Replace(spec, "name: world", "name: gpus", 1) + "gpu: {devices: " + tc.devices + "}\n"
		var a struct{ ID, Error string }
		st, _ := readers[0].e.do("POST", "/v1/jobs", map[string]any{"spec": text, "hosts": tc.hosts, "host": 0}, &a)
		switch {
		case tc.want == "" && st != 201:
			t.Errorf("devices %s on %d hosts: %d %q, want 201", tc.devices, tc.hosts, st, a.Error)
		case tc.want != "" && (st != 400 || !strings.Contains(a.Error, tc.want)):
			t.Errorf("devices %s on %d hosts: %d %q, want 400 saying %q", tc.devices, tc.hosts, st, a.Error, tc.want)
		}
		if st == 201 {
			readers[0].e.do("DELETE", "/v1/jobs/"+a.ID, nil, nil)
		}
	}
	if err := startReaders(ctx, readers)(); err != nil {
		t.Fatal(err)
	}
	var all []int64
	for _, r := range readers {
		if len(r.cursors) == 0 || len(r.cursors) != len(readers[0].cursors) {
			t.Fatalf("rank %d got %d batches, rank 0 %d", r.rank, len(r.cursors), len(readers[0].cursors))
		}
		for _, c := range r.cursors {
			if int(c.Rank) != r.rank {
				t.Fatalf("rank %d read a batch for rank %d", r.rank, c.Rank)
			}
		}
		all = append(all, r.rows...)
	}
	seen := map[int64]bool{}
	for _, id := range all {
		if seen[id] || id%4 == 3 {
			t.Fatalf("row %d read twice, or past the filter", id)
		}
		seen[id] = true
	}
	if kept := 7500; kept-len(seen) >= 2*4*100 {
		t.Fatalf("%d rows of the %d kept were read: two steps or more dropped", len(seen), kept)
	}
}

// A daemon serving host 1 of 2, killed with SIGKILL mid-epoch and started
// again, adopts its ranks' rings (named by their world ranks) and its
// readers continue exactly: every batch once, in order, no row twice. The
// restarted run deals the units by the counts the first one kept.
func TestKill9OneHostOfTwo(t *testing.T) {
	e := newEnv(t)
	e.start()
	spec := strings.Replace(specFor("k9h", smallData, "world_size: 4\npipeline:\n  - filter: \"row_id % 4 != 3\"\n"),
		"columns: [row_id]\n", "", 1)
	j := e.submit(spec, map[string]any{"hosts": 2, "host": 1})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	readers := []*reader{{e: e, job: j.ID, rank: 2, delay: 3 * time.Millisecond}, {e: e, job: j.ID, rank: 3, delay: 3 * time.Millisecond}}
	wait := startReaders(ctx, readers)
	waitFor(t, "10 batches read", 30*time.Second, func() bool { return readers[0].count()+readers[1].count() >= 10 })
	e.kill9()
	time.Sleep(300 * time.Millisecond) // long enough for the readers to see the producer die
	e.start()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, r := range readers {
		if len(r.cursors) == 0 || len(r.cursors) != len(readers[0].cursors) {
			t.Fatalf("rank %d: %d batches, rank 2 %d", r.rank, len(r.cursors), len(readers[0].cursors))
		}
		checkAdopted(t, r)
		for _, id := range r.rows {
			if seen[id] {
				t.Fatalf("row %d read twice", id)
			}
			seen[id] = true
		}
	}
	got := e.waitJob(j.ID, 10*time.Second, "done")
	if got.Restarts != 1 || got.Hosts != 2 || got.Host != 1 {
		t.Errorf("after the restart: generation_restarts %d, host %d of %d; want 1, 1 of 2", got.Restarts, got.Host, got.Hosts)
	}
	if n := strings.Count(e.log.String(), "units counted for the hosts' split"); n != 1 {
		t.Errorf("the units were counted %d times, want once: the restarted run reuses the counts", n)
	}
	// The same spec submitted again, once the job is over: a new job,
	// which deals its units by the counts the first one kept.
	waitFor(t, "the rings removed", 10*time.Second, func() bool { return len(e.job(j.ID).Rings) == 0 })
	again := e.submit(spec, map[string]any{"hosts": 2, "host": 1})
	if again.ID == j.ID {
		t.Fatalf("the second submission joined the ended job %s", j.ID)
	}
	waitFor(t, "the second job producing", 10*time.Second, func() bool { return e.job(again.ID).Progress.Batches > 0 })
	if n := strings.Count(e.log.String(), "units counted for the hosts' split"); n != 1 {
		t.Errorf("the units were counted %d times, want once: a job of the same spec reuses the counts", n)
	}
}
