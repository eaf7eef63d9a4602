package peer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
)

// TestCompilesBoundedAfterCancel: a peer admits at most MaxInFlight
// units, but a unit's job compiled on a goroutine of its own, under a
// context of its own (5 minutes), that outlived the unit (found by a
// review): a requester that gave up on its units (its deadline, a hedge
// won, or on purpose) freed their slots at once while their compiles
// went on. Each compile
// plans the job and loads its side table (any file beneath the roots the
// ticket names), outside max_memory. So one certified requester,
// sending tickets of distinct jobs and canceling them, has the peer
// compile as many jobs at once as it likes. The compiles in progress
// must stay within the peer's admissions (or be canceled with the last
// unit waiting on them).
func TestCompilesBoundedAfterCancel(t *testing.T) {
	f := newFixture(t)
	s, addr := f.server(nil) // MaxInFlight 4
	client := f.flightClient(addr)
	unit := localPlan(t, f.job("compiles-plan")).Units[0]
	const jobs = 16
	tickets := make([][]byte, jobs)
	for i := range tickets {
		tickets[i] = f.ticketFor(fmt.Sprintf("compiles-%d", i), unit)
	}
	var running, most atomic.Int64
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	compileHook = func() { // a slow compile: a large side table, a slow mount
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-release
		running.Add(-1)
	}
	t.Cleanup(func() {
		free()
		for running.Load() > 0 {
			time.Sleep(time.Millisecond)
		}
		compileHook = nil
	})
	for _, tk := range tickets {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		stream, err := client.DoGet(ctx, &flight.Ticket{Ticket: tk})
		if err == nil {
			_, err = stream.Recv()
		}
		cancel()
		if err == nil {
			t.Fatal("a unit answered while its compile was held")
		}
	}
	// Every unit has given up and its slot is free again.
	waitFor(t, "the slots to be free", func() bool { return s.InFlight() == 0 })
	time.Sleep(50 * time.Millisecond)
	if got, max := most.Load(), int64(s.cfg.MaxInFlight); got > max {
		t.Fatalf("%d compiles running at once at a peer that admits %d units, %d still running with no unit waiting on them",
			got, max, running.Load())
	}
}
