package peer

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
)

// TestFirstUnitsOfAJobKeepTheBudget: max_memory promises that "a unit
// larger than the whole budget runs alone". A unit's estimate is its
// input plus the job's last output per input row, which a job's cached
// processor learns only once a unit is done: every unit of a job the
// peer had not computed yet (a new job, or one evicted from the cache of
// 8) was estimated at its input alone (found by a review; now also at
// its output's fixed columns, outRowBytes). A job whose ops grow the data (a padded
// sequence: the spec allows 1Mi elements a row) then computes unit
// after unit beside another that already holds more than the whole
// budget. Here the first unit's output (about 23 MB against a 4 MiB
// budget) is held, streaming to a requester that reads slowly, and a
// second unit of the same job still starts computing.
func TestFirstUnitsOfAJobKeepTheBudget(t *testing.T) {
	f := newFixture(t)
	s, addr := f.server(func(s *Server) {
		s.cfg.MaxMemory = 4 << 20
		s.mem = newBudget(s.cfg.MaxMemory)
	})
	client := f.flightClient(addr) // gRPC's 64 KiB window: the peer's send blocks until it is read
	name := "budget"
	text := strings.Replace(f.text(name), "length: 8,", "length: 4096,", 1)
	job := f.job(name)
	units := localPlan(t, f.job(name+"plan")).Units
	tk := func(i int) *flight.Ticket { return f.unitTicket(text, job, units[i]) }
	// Both units of the new job are sent at once, as a requester's
	// spill workers do; each is held as it starts computing, so that
	// neither has taught the job its output size yet.
	var now, most atomic.Int64
	release := make(chan struct{})
	s.hook = func() {
		n := now.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		now.Add(-1)
	}
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 2 {
		st, err := client.DoGet(ctx, tk(i))
		if err != nil {
			t.Fatal(err)
		}
		go st.Recv()
	}
	waitFor(t, "the units to compute or wait for memory", func() bool {
		return now.Load()+int64(s.mem.waiters()) >= 2
	})
	free()
	// Their outputs, held while they stream (the requester reads one
	// message of each), are what the budget is to bound.
	var peak int64
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && !(most.Load() >= 2 && peak > 2*s.mem.limit) {
		s.mem.mu.Lock()
		peak = max(peak, s.mem.used)
		s.mem.mu.Unlock()
		time.Sleep(2 * time.Millisecond)
	}
	if most.Load() >= 2 && peak > s.mem.limit {
		t.Fatalf("two units computed at once and held %d bytes of a %d-byte budget (each output alone is larger than the budget)", peak, s.mem.limit)
	}
}
