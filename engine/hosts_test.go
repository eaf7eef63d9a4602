package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

// hostRun runs one host's share of src (runRings) and returns its ranks'
// batches by world rank, with its rings' names in its rank order.
func hostRun(t *testing.T, src string, hosts engine.Hosts, workers int, resume []engine.Cursor) (map[int]got, []string, error) {
	t.Helper()
	res, names, err := runRings(t, src, workers, engine.Options{Hosts: hosts, Resume: resume})
	if err != nil {
		return nil, nil, err
	}
	out := map[int]got{}
	for r, g := range res {
		for _, c := range g.batches {
			if c.Rank != g.batches[0].Rank {
				t.Fatalf("host %d ring %s: batches for ranks %d and %d", hosts.Index, names[r], g.batches[0].Rank, c.Rank)
			}
		}
		if len(g.batches) > 0 {
			out[int(g.batches[0].Rank)] = g
		}
	}
	return out, names, nil
}

const hostsJob = `
inputs: [DATA]
batch: {size: %d, last: %s}
world_size: %d
epochs: 2
seed: 11
shuffle: {units: true, buffer: %d}
%s
`

// The ranks of a world split between hosts get equal batch counts each
// epoch, although each host batches only its own units; every row goes to
// one rank at most (exactly one, padding aside, with last: pad); and a
// host's batches do not depend on its workers.
func TestHostsShareTheWorld(t *testing.T) {
	filter := "pipeline:\n  - filter: \"row_id % 3 != 1\"\n"
	sample := "pipeline:\n  - sample: {key: row_id, rates: [{rate: 0.4}]}\n"
	// Rows whose seq_0 is longer than 8 are skipped: Select alone cannot
	// count them, so the units are run whole to count.
	long := "pipeline:\n  - filter: \"row_id % 2 == 0\"\n  - sequence: {column: seq_0, length: 8, on_long: skip}\n" +
		"  - select: [row_id, seq_0]\n"
	for _, tc := range []struct {
		name           string
		hosts, world   int
		size, buffer   int
		last, pipeline string
	}{
		{"2 hosts of 2 ranks, drop", 2, 4, 250, 0, "drop", ""},
		{"2 hosts, a filter, drop", 2, 4, 200, 900, "drop", filter},
		{"3 hosts of 1 rank, pad", 3, 3, 300, 500, "pad", ""},
		{"2 hosts, a filter, pad", 2, 2, 400, 0, "pad", filter},
		{"2 hosts, a sample, pad", 2, 4, 128, 700, "pad", sample},
		{"2 hosts, ops after Select drop rows, drop", 2, 2, 100, 300, "drop", long},
		{"2 hosts, ops after Select drop rows, pad", 2, 4, 64, 0, "pad", long},
		{"2 hosts, a filter that keeps a few units' rows, drop", 2, 2, 100, 0, "drop", "pipeline:\n  - filter: \"row_id < 2800\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.pipeline == "" {
				tc.pipeline = "columns: [row_id]\n"
			}
			src := fmt.Sprintf(hostsJob, tc.size, tc.last, tc.world, tc.buffer, tc.pipeline)
			// The rows the job keeps: one host of one rank, every row.
			all, _, err := hostRun(t, fmt.Sprintf(hostsJob, 1000, "keep", 1, 0, tc.pipeline), engine.Hosts{}, 2, nil)
			if err != nil {
				t.Fatal(err)
			}
			kept := map[int64]bool{}
			for k, b := range all[0].batches {
				for _, id := range all[0].rows[k] {
					if b.Epoch == 0 {
						kept[id] = true
					}
				}
			}
			world := map[int]got{}
			for h := range tc.hosts {
				got, names, err := hostRun(t, src, engine.Hosts{Count: tc.hosts, Index: h}, 2, nil)
				if err != nil {
					t.Fatalf("host %d: %v", h, err)
				}
				local := tc.world / tc.hosts
				for r, name := range names {
					if want := fmt.Sprintf("r.r%d", h*local+r); name != want {
						t.Fatalf("host %d ring %d is %s, want %s", h, r, name, want)
					}
				}
				for r, s := range got {
					if r/local != h {
						t.Fatalf("host %d produced for rank %d", h, r)
					}
					world[r] = s
				}
				if h == tc.hosts-1 {
					again, _, err := hostRun(t, src, engine.Hosts{Count: tc.hosts, Index: h}, 1, nil)
					if err != nil || !reflect.DeepEqual(again, got) {
						t.Fatalf("host %d with 1 worker differs from 2 workers (%v)", h, err)
					}
				}
			}
			checkHostsWorld(t, world, tc.hosts, tc.world, tc.size, tc.last, kept)
		})
	}
}

// checkHostsWorld checks the batches of every rank of a world of world
// ranks, two epochs (TestHostsShareTheWorld).
func checkHostsWorld(t *testing.T, world map[int]got, hosts, ranks, size int, last string, kept map[int64]bool) {
	t.Helper()
	if len(world) != ranks {
		t.Fatalf("%d ranks got batches, want %d", len(world), ranks)
	}
	perEpoch := map[uint64]int{}
	for _, c := range world[0].batches {
		perEpoch[c.Epoch]++
	}
	if perEpoch[0] == 0 || perEpoch[0] != perEpoch[1] {
		t.Fatalf("rank 0: %v batches per epoch", perEpoch)
	}
	for e := range uint64(2) {
		seen := map[int64]int{}
		real := make([]int, hosts) // each host's real rows
		for r := range ranks {
			s := world[r]
			n := 0
			for k, c := range s.batches {
				if c.Epoch != e {
					continue
				}
				if c.BatchIndex != uint64(n) {
					t.Fatalf("rank %d epoch %d: batch %d at position %d", r, e, c.BatchIndex, n)
				}
				n++
				rows := s.rows[k]
				if len(rows) != size {
					t.Fatalf("rank %d: a batch of %d rows, want %d", r, len(rows), size)
				}
				if last == "pad" {
					rows = rows[:len(rows)-s.pads[k]]
				}
				for _, id := range rows {
					seen[id]++
				}
				real[r/(ranks/hosts)] += len(rows)
			}
			if n != perEpoch[e] {
				t.Fatalf("epoch %d: rank %d got %d batches, rank 0 %d", e, r, n, perEpoch[e])
			}
		}
		for id, n := range seen {
			if n > 1 || !kept[id] {
				t.Fatalf("epoch %d: row %d went to %d batches; the job keeps it: %v", e, id, n, kept[id])
			}
		}
		most := 0 // with last: pad, the steps of the host with the most rows
		for _, n := range real {
			step := ranks / hosts * size
			most = max(most, (n+step-1)/step)
		}
		switch {
		case last == "pad" && perEpoch[e] != most:
			t.Fatalf("epoch %d: %d steps, but the host with the most rows fills %d", e, perEpoch[e], most)
		case last == "pad" && len(seen) != len(kept):
			t.Fatalf("epoch %d: %d distinct real rows, want %d", e, len(seen), len(kept))
		case last == "drop" && len(kept)-len(seen) >= 2*ranks*size:
			t.Fatalf("epoch %d: %d rows of %d, two steps or more dropped", e, len(seen), len(kept))
		}
	}
}

// A host resumed from its ranks' cursors gives exactly the batches its
// uninterrupted run gave from there on.
func TestHostsResumeEqualsUninterruptedTail(t *testing.T) {
	filter := "pipeline:\n  - filter: \"row_id % 3 != 1\"\n"
	for _, last := range []string{"drop", "pad"} {
		src := fmt.Sprintf(hostsJob, 150, last, 4, 800, filter)
		hosts := engine.Hosts{Count: 2, Index: 1}
		full, _, err := hostRun(t, src, hosts, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		perEpoch := uint64(len(full[2].batches) / 2)
		for _, cur := range [][]engine.Cursor{
			{{Epoch: 0, Batch: 3}, {Epoch: 0, Batch: 1}},
			{{Epoch: 1, Batch: perEpoch - 1}, {Epoch: 1, Batch: 2}},
		} {
			got, _, err := hostRun(t, src, hosts, 3, cur)
			if err != nil {
				t.Fatal(err)
			}
			for r, c := range cur {
				s := full[2+r]
				want := tailFrom(rankStream{s.batches, s.rows}, c)
				have := rankStream{got[2+r].batches, got[2+r].rows}
				if !reflect.DeepEqual(have, want) {
					t.Fatalf("last %s, resumed at %v: rank %d got %d batches, want the uninterrupted tail of %d",
						last, cur, 2+r, len(have.cursors), len(want.cursors))
				}
			}
		}
	}
}

// A split that does not fit the world, or the input, is refused with an
// error that says why.
func TestHostsErrors(t *testing.T) {
	src := fmt.Sprintf(hostsJob, 100, "drop", 4, 0, "columns: [row_id]\n")
	for _, tc := range []struct {
		hosts engine.Hosts
		want  string
	}{
		{engine.Hosts{Count: 3, Index: 0}, "world size 4 does not split evenly between 3 hosts"},
		{engine.Hosts{Count: 2, Index: 2}, "host 2 of 2: want 0 to 1"},
		{engine.Hosts{Count: 2, Index: -1}, "host -1 of 2: want 0 to 1"},
		{engine.Hosts{Count: 1, Index: 1}, "host 1 of 1: there is only host 0"},
	} {
		_, _, err := hostRun(t, src, tc.hosts, 1, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error saying %q", tc.hosts, err, tc.want)
		}
	}
	// testdata/small is 15 units of at most 700 rows.
	wide := fmt.Sprintf(hostsJob, 1, "drop", 16, 0, "columns: [row_id]\n")
	_, _, err := hostRun(t, wide, engine.Hosts{Count: 16, Index: 0}, 1, nil)
	if err == nil || !strings.Contains(err.Error(), "16 hosts but the input has 15 work units") {
		t.Errorf("16 hosts: %v", err)
	}
	// Only one host's units hold rows the filter keeps: the other has
	// nothing to pad its steps with. Every host fails before a batch
	// (the one without rows failed at its first epoch's end, the other's
	// ranks waiting on it meanwhile).
	few := fmt.Sprintf(hostsJob, 100, "pad", 2, 0, "pipeline:\n  - filter: \"row_id < 300\"\n")
	for h := range 2 {
		_, _, err := hostRun(t, few, engine.Hosts{Count: 2, Index: h}, 1, nil)
		if err == nil || !strings.Contains(err.Error(), "is dealt units that yield no rows, so last: pad has nothing to fill") {
			t.Errorf("host %d: %v, want every host to fail before a batch, naming the host without rows", h, err)
		}
	}
	// With last: drop, no host can fill a step the other cannot: both fail.
	few = strings.Replace(few, "last: pad", "last: drop", 1)
	for h := range 2 {
		_, _, err := hostRun(t, few, engine.Hosts{Count: 2, Index: h}, 1, nil)
		if err == nil || !strings.Contains(err.Error(), "the 2 hosts cannot each fill a step of 1 ranks × 100 rows: their units yield") {
			t.Errorf("host %d: %v", h, err)
		}
	}
}

// Counting the units' rows takes the CPU through Options.Gate, as
// decoding does: the daemon's share between jobs holds for it too.
func TestHostsCountThroughTheGate(t *testing.T) {
	src := fmt.Sprintf(hostsJob, 100, "drop", 2, 0, "pipeline:\n  - filter: \"row_id % 3 != 1\"\n")
	src = strings.Replace(src, "epochs: 2", "epochs: 1", 1)
	gated := func(hosts engine.Hosts) (calls, units int) {
		dir := t.TempDir()
		abs, _ := filepath.Abs("../testdata/small")
		text := strings.ReplaceAll(src, "DATA", abs) + fmt.Sprintf("ring: {dir: %q, name: g, slots: 3}\ndecode: {workers: 2, max_unit_rows: 700}\n", dir)
		job, err := spec.Parse("t.yaml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		st, err := engine.Run(context.Background(), job, engine.Options{
			Hosts: hosts,
			Gate: func(context.Context) (func(), error) {
				mu.Lock()
				calls++
				mu.Unlock()
				return func() {}, nil
			},
			Ready: func(rings []string) {
				for _, name := range rings {
					wg.Add(1)
					go func() { defer wg.Done(); consume(context.Background(), dir, name) }()
				}
			},
		})
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		return calls, st.Units
	}
	one, units := gated(engine.Hosts{})
	a, _ := gated(engine.Hosts{Count: 2, Index: 0})
	b, _ := gated(engine.Hosts{Count: 2, Index: 1})
	// Each host counts every unit and decodes its own.
	if one != units || a+b != one+2*units {
		t.Errorf("the gate was taken %d and %d times by two hosts, %d by one: want %d more for the counting", a, b, one, 2*units)
	}
}

// Units are dealt by the rows they keep, not the rows they hold: where a
// filter keeps the first two units' rows only (560 and 544 of them), each
// host gets one, whatever the seed; dealt by planned rows, both would often
// go to one host, and the other could fill no step.
func TestHostsDealKeptRows(t *testing.T) {
	for seed := range 4 {
		src := fmt.Sprintf(hostsJob, 100, "drop", 2, 0, "pipeline:\n  - filter: \"row_id < 1104\"\n")
		src = strings.Replace(src, "seed: 11", fmt.Sprintf("seed: %d", seed), 1)
		for h := range 2 {
			got, _, err := hostRun(t, src, engine.Hosts{Count: 2, Index: h}, 1, nil)
			if err != nil {
				t.Fatalf("seed %d host %d: %v", seed, h, err)
			}
			if n := len(got[h].batches); n != 2*5 {
				t.Fatalf("seed %d host %d: %d batches in 2 epochs, want 5 a epoch", seed, h, n)
			}
		}
	}
}

// A run given an earlier run's counts of the same plan deals the units
// without counting them again, and produces the same batches; counts of
// another plan are not used.
func TestHostsReuseCounts(t *testing.T) {
	src := fmt.Sprintf(hostsJob, 100, "drop", 4, 500, "pipeline:\n  - filter: \"row_id % 3 != 1\"\n")
	hosts := engine.Hosts{Count: 2, Index: 1}
	var plan string
	var rows []int64
	var calls atomic.Int64
	run := func(opts engine.Options) []got {
		opts.Hosts = hosts
		opts.Gate = func(context.Context) (func(), error) { calls.Add(1); return func() {}, nil }
		res, _, err := runRings(t, src, 1, opts)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := run(engine.Options{Counted: func(p string, r []int64) { plan, rows = p, r }})
	counting := calls.Load()
	if !strings.HasPrefix(plan, "sha256:") || len(rows) == 0 {
		t.Fatalf("Counted was called with %q and %d counts", plan, len(rows))
	}
	for _, tc := range []struct {
		name   string
		plan   string
		counts bool
	}{
		{"the same plan", plan, false},
		{"another plan", "sha256:0", true},
	} {
		calls.Store(0)
		recounted := false
		again := run(engine.Options{UnitRows: rows, UnitRowsPlan: tc.plan, Counted: func(string, []int64) { recounted = true }})
		if !reflect.DeepEqual(again, first) {
			t.Fatalf("%s: the batches differ from the first run's", tc.name)
		}
		if n := calls.Load(); recounted != tc.counts || (n == counting) != tc.counts {
			t.Fatalf("%s: counted again %v (gate taken %d times, %d the first time)", tc.name, recounted, n, counting)
		}
	}
}
