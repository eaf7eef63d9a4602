package peer

import (
	"context"
	"io"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
)

// TestSideTablesCountAgainstMaxMemory: a peer keeps up to 8 compiled jobs,
// each with its joins' side tables loaded, for as long as they stay in its
// cache. That memory was outside max_memory: units were admitted as if the
// tables took nothing. Now a compiled job's side tables are resident bytes
// of the budget, given back when the job leaves the cache, and a unit
// waits while other units hold memory and the units, the tables and its
// estimate pass the limit.
func TestSideTablesCountAgainstMaxMemory(t *testing.T) {
	f := newFixture(t)
	s, addr := f.server(nil)
	client := f.flightClient(addr)
	name := "side"
	text := f.text(name) // an anti-join on part-00002's row_id
	job := f.job(name)
	units := localPlan(t, f.job(name+"plan")).Units
	tk := func(i int) *flight.Ticket { return f.unitTicket(text, job, units[i]) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	drain := func(i int) {
		st, err := client.DoGet(ctx, tk(i))
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := st.Recv(); err != nil {
				if err != io.EOF {
					t.Fatalf("unit %d: %v", i, err)
				}
				return
			}
		}
	}
	drain(0) // compiles the job: its side table is loaded

	side := s.SideMemory()
	s.jobs.mu.Lock()
	var cj *cachedJob
	for _, j := range s.jobs.byKey {
		cj = j
	}
	s.jobs.mu.Unlock()
	if cj == nil || cj.up == nil {
		t.Fatal("the job is not in the peer's cache")
	}
	if want := cj.up.SideMemory(); side <= 0 || side != want {
		t.Fatalf("side tables counted: %d bytes, want the compiled job's %d (> 0)", side, want)
	}

	// A budget that two units' estimates fit, but not with the side table
	// besides: the second unit must wait for the first.
	e1, e2 := cj.estimate(&units[1]), cj.estimate(&units[2])
	s.mem.mu.Lock()
	s.mem.limit = e1 + e2 + side/2
	s.mem.mu.Unlock()
	var now, most atomic.Int64
	hold, free := held(t)
	s.hook = func() {
		n := now.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-hold
		now.Add(-1)
	}
	done := make(chan struct{}, 2)
	for _, i := range []int{1, 2} {
		go func() { drain(i); done <- struct{}{} }()
	}
	waitFor(t, "both units to compute or wait for memory", func() bool {
		return now.Load()+int64(s.mem.waiters()) >= 2
	})
	if n := now.Load(); n != 1 {
		t.Errorf("%d units computing at once with %d bytes of side tables in a %d-byte budget (estimates %d and %d): want 1",
			n, side, s.mem.limit, e1, e2)
	}
	free()
	<-done
	<-done
	if most.Load() != 1 {
		t.Errorf("%d units computed at once, want 1", most.Load())
	}

	// Out of the cache, the job's tables are given back.
	s.jobs.closeAll()
	if n := s.SideMemory(); n != 0 {
		t.Errorf("%d bytes of side tables still counted after the cache was emptied", n)
	}
}
