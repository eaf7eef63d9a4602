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
