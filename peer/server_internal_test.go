package peer

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lastmile/lastmile/column"
)

// TestWorkersAndAdmission: a peer admits MaxInFlight units but computes
// Workers at once; the rest wait their turn rather than being refused, and
// a unit past MaxInFlight is refused at once.
func TestWorkersAndAdmission(t *testing.T) {
	f := newFixture(t)
	var now, most atomic.Int32
	hold := make(chan struct{})
	s, addr := f.server(func(s *Server) {
		s.cfg.Workers, s.cfg.MaxInFlight = 1, 3
		s.slots, s.work = make(chan struct{}, 3), make(chan struct{}, 1)
		s.hook = func() {
			n := now.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			<-hold
			now.Add(-1)
		}
	})
	p := f.pool(f.ca.issue("gpu-host"), addr)
	tk := f.ticket("workers")
	r := p.pick("")
	done := make(chan error, 3)
	for range 3 {
		go func() {
			var out column.Batch
			_, err := fetch(context.Background(), r, tk, &out)
			done <- err
		}()
	}
	for s.busy.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	var out column.Batch
	if _, err := fetch(context.Background(), r, tk, &out); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a fourth unit: %v, want ResourceExhausted", err)
	}
	close(hold)
	for range 3 {
		if err := <-done; err != nil {
			t.Errorf("an admitted unit: %v", err)
		}
	}
	if most.Load() != 1 || s.Stats().Units.Load() != 3 {
		t.Errorf("%d units computed at once (want 1), %d served (want 3)", most.Load(), s.Stats().Units.Load())
	}
}

// TestInfo: a peer tells a requester with a certificate its version, its
// compute identity and workers; other actions are refused.
func TestInfo(t *testing.T) {
	f := newFixture(t)
	_, addr := f.server(func(s *Server) { s.cfg.Workers, s.cfg.MaxInFlight = 3, 6 })
	p := f.pool(f.ca.issue("gpu-host"), addr)
	in, err := p.Info(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	if in != (Info{Version: Version, Compute: Compute(), Workers: 3, MaxInFlight: 6}) {
		t.Errorf("info %+v", in)
	}
	if _, err := p.Info(context.Background(), "127.0.0.1:1"); err == nil {
		t.Error("info of an address outside the pool: no error")
	}
	client, release, err := p.pick("").conns.use()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	stream, err := client.DoAction(context.Background(), &flight.Action{Type: "drop-everything"})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("an unknown action: %v, want Unimplemented", err)
	}
}

// TestMemoryBoundsComputing: a unit reserves an estimate of its memory
// before it computes, so that with a small max_memory units wait for
// each other rather than all computing at once; a unit larger than the
// whole budget still runs, alone.
func TestMemoryBoundsComputing(t *testing.T) {
	f := newFixture(t)
	units := localPlan(t, f.job("memoryplan")).Units
	u := units[0]
	tk := f.ticketFor("memory", u)
	// A unit's estimate before its job has computed one: its input, and
	// its output's fixed columns at the unit's rows (outRowBytes).
	pt, err := parseTicket(tk)
	if err != nil {
		t.Fatal(err)
	}
	up, err := compile(pt, rootsFS{r: f.roots}, 1)
	if err != nil {
		t.Fatal(err)
	}
	j := &cachedJob{rowBytes: outRowBytes(up.Fields())}
	side := up.SideMemory() // the job's side table, counted while it is cached
	up.Close()
	est := j.estimate(&u)
	if est <= 0 {
		t.Fatalf("unit %+v: estimate %d", u, est)
	}
	for _, c := range []struct {
		name   string
		budget int64
		most   int32 // units computing at once
	}{
		{"room for one", side + est + est/2, 1},
		{"room for two", side + 2*est + est/2, 2},
		{"less than one unit", 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var now, most atomic.Int32
			hold, free := held(t)
			s, addr := f.server(func(s *Server) {
				s.cfg.Workers, s.cfg.MaxInFlight = 4, 4
				s.slots, s.work = make(chan struct{}, 4), make(chan struct{}, 4)
				s.mem = newBudget(c.budget)
				s.hook = func() {
					n := now.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					<-hold
					now.Add(-1)
				}
			})
			r := f.pool(f.ca.issue("gpu-host"), addr).pick("")
			done := make(chan error, 4)
			for range 4 {
				go func() {
					var out column.Batch
					_, err := fetch(context.Background(), r, tk, &out)
					done <- err
				}()
			}
			waitFor(t, "units computing or waiting for memory", func() bool {
				if now.Load() > c.most {
					t.Fatalf("%d units computing at once, want at most %d", now.Load(), c.most)
				}
				return now.Load() == c.most && s.mem.waiters() == 4-int(c.most)
			})
			free()
			for range 4 {
				if err := <-done; err != nil {
					t.Errorf("a unit: %v", err)
				}
			}
			if most.Load() != c.most {
				t.Errorf("%d units computed at once, want %d", most.Load(), c.most)
			}
			waitFor(t, "the budget given back", func() bool {
				s.mem.mu.Lock()
				defer s.mem.mu.Unlock()
				return s.mem.used == 0 && s.Stats().Units.Load() == 4
			})
		})
	}
}

// TestComputePanic: a unit whose computation panics fails with an
// Internal error naming the panic; the peer goes on serving.
func TestComputePanic(t *testing.T) {
	f := newFixture(t)
	var first atomic.Bool
	s, addr := f.server(func(s *Server) {
		s.hook = func() {
			if first.CompareAndSwap(false, true) {
				panic("a bug")
			}
		}
	})
	p := f.pool(f.ca.issue("gpu-host"), addr)
	tk := f.ticket("panic")
	r := p.pick("")
	var out column.Batch
	_, err := fetch(context.Background(), r, tk, &out)
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "panicked: a bug") {
		t.Fatalf("the panicking unit: %v, want Internal naming the panic", err)
	}
	if _, err := fetch(context.Background(), r, tk, &out); err != nil {
		t.Fatalf("the next unit: %v", err)
	}
	if s.Stats().Failures.Load() != 1 {
		t.Errorf("%d failures counted, want 1", s.Stats().Failures.Load())
	}
}
