package pool_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lastmile/lastmile/pool"
)

// result is the R of most tests: a reusable buffer that records which unit
// filled it and how many units have used it.
type result struct {
	unit  int
	uses  int
	bytes []byte
}

// checker runs a pool with instrumented work and emit functions and checks
// the contract: every index claimed once, emitted once and in order, at most
// InFlight results live, buffers handed back from unit i-InFlight.
type checker struct {
	t        *testing.T
	cfg      pool.Config
	n        int
	inFlight int // cfg.InFlight with the default applied

	delay func(i int) time.Duration // per-unit delay inside work; nil for none
	fail  func(i int) error         // error of unit i; nil for none

	calls    []atomic.Int32 // work calls per unit
	live     atomic.Int64   // units between the start of work and the end of emit
	maxLive  atomic.Int64
	allocs   atomic.Int64 // buffers allocated because buf was nil
	emitted  []int
	workerOK atomic.Bool
}

func newChecker(t *testing.T, cfg pool.Config, n int) *checker {
	c := &checker{t: t, cfg: cfg, n: n, inFlight: cfg.InFlight, calls: make([]atomic.Int32, n)}
	if c.inFlight == 0 {
		c.inFlight = 2 * cfg.Workers
	}
	c.workerOK.Store(true)
	return c
}

func (c *checker) work(ctx context.Context, worker, i int, buf *result) (*result, error) {
	c.calls[i].Add(1)
	if worker < 0 || worker >= min(c.cfg.Workers, c.n) {
		c.workerOK.Store(false)
	}
	l := c.live.Add(1)
	for {
		m := c.maxLive.Load()
		if l <= m || c.maxLive.CompareAndSwap(m, l) {
			break
		}
	}
	if buf == nil {
		c.allocs.Add(1)
		buf = &result{bytes: make([]byte, 64)}
	} else if buf.unit != i-c.inFlight {
		c.t.Errorf("unit %d got the buffer of unit %d, want that of unit %d", i, buf.unit, i-c.inFlight)
	}
	if c.delay != nil {
		if d := c.delay(i); d > 0 {
			time.Sleep(d)
		}
	}
	buf.unit = i
	buf.uses++
	buf.bytes[0] = byte(i)
	if c.fail != nil {
		if err := c.fail(i); err != nil {
			c.live.Add(-1)
			return buf, err
		}
	}
	return buf, nil
}

func (c *checker) emit(i int, r *result) error {
	defer c.live.Add(-1)
	if r.unit != i || r.bytes[0] != byte(i) {
		c.t.Errorf("emit(%d) got the result of unit %d", i, r.unit)
	}
	c.emitted = append(c.emitted, i)
	return nil
}

func (c *checker) run(ctx context.Context) error {
	return pool.Run(ctx, c.cfg, c.n, c.work, c.emit)
}

// check asserts the invariants that hold however Run ended: emitted is a
// prefix 0..len-1 of the plan, work ran at most once per unit, and at most
// InFlight results were live.
func (c *checker) check() {
	c.t.Helper()
	for j, i := range c.emitted {
		if i != j {
			c.t.Fatalf("emitted[%d] = %d: out of plan order (%v)", j, i, c.emitted)
		}
	}
	for i := range c.calls {
		if n := c.calls[i].Load(); n > 1 {
			c.t.Errorf("work called %d times for unit %d", n, i)
		}
	}
	for _, i := range c.emitted {
		if c.calls[i].Load() != 1 {
			c.t.Errorf("unit %d emitted but work called %d times", i, c.calls[i].Load())
		}
	}
	if m := c.maxLive.Load(); m > int64(c.inFlight) {
		c.t.Errorf("%d results live at once, InFlight is %d", m, c.inFlight)
	}
	if a := c.allocs.Load(); a > int64(c.inFlight) {
		c.t.Errorf("%d buffers allocated, want at most InFlight = %d", a, c.inFlight)
	}
	if !c.workerOK.Load() {
		c.t.Errorf("worker index out of range [0, %d)", min(c.cfg.Workers, c.n))
	}
}

// checkAll asserts a complete run.
func (c *checker) checkAll() {
	c.t.Helper()
	c.check()
	if len(c.emitted) != c.n {
		c.t.Fatalf("emitted %d units, want %d", len(c.emitted), c.n)
	}
}

// TestOrder runs units with random delays, so they finish out of order, and
// checks that they are emitted in plan order, each once, with bounded memory
// and recycled buffers. synctest makes the delays virtual: the test is fast
// and each seed's schedule of sleeps is reproducible.
func TestOrder(t *testing.T) {
	for _, w := range []int{1, 2, 3, 8, 16} {
		for _, inFlight := range []int{0, w, 3*w + 1} {
			t.Run(fmt.Sprintf("W=%d/InFlight=%d", w, inFlight), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					c := newChecker(t, pool.Config{Workers: w, InFlight: inFlight}, 300)
					rng := rand.New(rand.NewPCG(uint64(w), uint64(inFlight)))
					delays := make([]time.Duration, c.n)
					for i := range delays {
						delays[i] = time.Duration(rng.IntN(5000)) * time.Microsecond
					}
					c.delay = func(i int) time.Duration { return delays[i] }
					if err := c.run(t.Context()); err != nil {
						t.Fatal(err)
					}
					c.checkAll()
					if want := int64(min(c.inFlight, c.n)); c.allocs.Load() != want {
						t.Errorf("%d buffers allocated, want exactly %d", c.allocs.Load(), want)
					}
				})
			})
		}
	}
}

// TestOrderParallel is TestOrder on real time and real cores, without
// delays, so that the race detector sees the workers and the emitter truly
// overlap.
func TestOrderParallel(t *testing.T) {
	for _, w := range []int{1, 2, 3, 8, 16} {
		t.Run(fmt.Sprintf("W=%d", w), func(t *testing.T) {
			c := newChecker(t, pool.Config{Workers: w}, 5000)
			c.delay = func(i int) time.Duration {
				if i%7 == 0 {
					runtime.Gosched()
				}
				return 0
			}
			if err := c.run(t.Context()); err != nil {
				t.Fatal(err)
			}
			c.checkAll()
		})
	}
}

// TestInFlightReached checks that the bound is not just respected but used:
// with a slow emitter the workers run ahead by exactly InFlight units.
func TestInFlightReached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := pool.Config{Workers: 3, InFlight: 7}
		c := newChecker(t, cfg, 50)
		var emitted []int
		err := pool.Run(t.Context(), cfg, c.n, c.work, func(i int, r *result) error {
			time.Sleep(time.Millisecond) // workers are faster than the emitter
			c.emitted = append(c.emitted, i)
			emitted = append(emitted, i)
			c.live.Add(-1)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		c.checkAll()
		if m := c.maxLive.Load(); m != int64(cfg.InFlight) {
			t.Errorf("at most %d results live, want InFlight = %d", m, cfg.InFlight)
		}
	})
}

func TestZeroUnits(t *testing.T) {
	err := pool.Run(t.Context(), pool.Config{Workers: 4}, 0,
		func(context.Context, int, int, int) (int, error) {
			t.Error("work called")
			return 0, nil
		},
		func(int, int) error {
			t.Error("emit called")
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

func TestMoreWorkersThanUnits(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		c := newChecker(t, pool.Config{Workers: 16}, n)
		if err := c.run(t.Context()); err != nil {
			t.Fatal(err)
		}
		c.checkAll() // also checks worker < n
	}
}

func TestInvalid(t *testing.T) {
	f := func(cfg pool.Config, n int, want string) {
		t.Helper()
		err := pool.Run(t.Context(), cfg, n,
			func(context.Context, int, int, int) (int, error) { return 0, nil },
			func(int, int) error { return nil })
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Run(%+v, n=%d) = %v, want an error mentioning %q", cfg, n, err, want)
		}
		if cfg.Validate() == nil && n >= 0 {
			t.Errorf("Validate(%+v) = nil", cfg)
		}
	}
	f(pool.Config{}, 1, "Workers")
	f(pool.Config{Workers: -1}, 1, "Workers")
	f(pool.Config{Workers: 4, InFlight: 3}, 1, "InFlight")
	f(pool.Config{Workers: 4, InFlight: -1}, 1, "InFlight")
	f(pool.Config{Workers: 1}, -1, "n is -1")

	for _, cfg := range []pool.Config{{Workers: 1}, {Workers: 4, InFlight: 4}, {Workers: 2, InFlight: 100}} {
		if err := cfg.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", cfg, err)
		}
	}
}

var errBoom = errors.New("boom")

// TestWorkError checks the error contract: when unit k fails, units 0..k-1
// are emitted, nothing after, and the error names k.
func TestNoLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	for round := range 20 {
		w := 1 + round%5
		work := func(ctx context.Context, _, i, _ int) (int, error) {
			switch {
			case round%4 == 0 && i == 50:
				return 0, errBoom
			case round%4 == 1 && i == 50:
				panic("kaboom")
			case i%10 == 0:
				runtime.Gosched()
			}
			return i, nil
		}
		emit := func(i, _ int) error {
			if round%4 == 2 && i == 60 {
				return errBoom
			}
			return nil
		}
		ctx, cancel := context.WithCancel(t.Context())
		if round%4 == 3 {
			time.AfterFunc(time.Duration(round)*100*time.Microsecond, cancel)
		}
		_ = pool.Run(ctx, pool.Config{Workers: w}, 10000, work, emit)
		cancel()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDeterministic: the emitted sequence is the same whatever the number of
// workers and the timing.
func TestDeterministic(t *testing.T) {
	const n = 500
	var want []int
	for _, w := range []int{1, 2, 3, 5, 8, 16} {
		var got []int
		err := pool.Run(t.Context(), pool.Config{Workers: w, InFlight: 2*w + 1}, n,
			func(_ context.Context, _, i int, buf []int) ([]int, error) {
				buf = buf[:0]
				for j := range i % 13 {
					buf = append(buf, i*31+j)
				}
				if i%3 == 0 {
					runtime.Gosched()
				}
				return buf, nil
			},
			func(i int, r []int) error {
				got = append(got, i)
				got = append(got, r...)
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		if want == nil {
			want = got
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("W=%d emitted a different sequence than W=1", w)
		}
	}
}

// TestStress runs many short pools with tight windows (InFlight == Workers
// included), random yields and, in half the rounds, a few failing units, on
// real cores, to shake out lost wake-ups (a hang) and broken invariants in
// the parking protocol: the emitted prefix must stop exactly at the lowest
// failing unit.
func TestStress(t *testing.T) {
	rounds := 400
	if testing.Short() {
		rounds = 40
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range rounds {
		w := 1 + rng.IntN(6)
		inFlight := w + rng.IntN(w+1)
		n := rng.IntN(400)
		seed := rng.Uint64()
		lowest := n
		failing := map[int]bool{}
		if round%2 == 1 && n > 0 {
			for range 1 + rng.IntN(3) {
				k := rng.IntN(n)
				failing[k] = true
				lowest = min(lowest, k)
			}
		}
		c := newChecker(t, pool.Config{Workers: w, InFlight: inFlight}, n)
		c.delay = func(i int) time.Duration {
			if (uint64(i)*seed)>>61 == 0 {
				runtime.Gosched()
			}
			return 0
		}
		c.fail = func(i int) error {
			if failing[i] {
				return errBoom
			}
			return nil
		}
		err := c.run(t.Context())
		c.check()
		if lowest == n {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			c.checkAll()
			continue
		}
		checkUnitError(t, err, lowest, "work", errBoom)
		if len(c.emitted) != lowest {
			t.Fatalf("round %d: emitted %d units, want %d (lowest failing unit)", round, len(c.emitted), lowest)
		}
	}
}

// TestParallelism checks in virtual time that nothing serializes the
// workers: n equal units of 1 ms on W workers take n/W ms, so the speedup
// over one worker is exactly W when cores are free.
func TestParallelism(t *testing.T) {
	for _, w := range []int{1, 2, 4, 8} {
		synctest.Test(t, func(t *testing.T) {
			const n = 96
			start := time.Now()
			err := pool.Run(t.Context(), pool.Config{Workers: w}, n,
				func(_ context.Context, _, i, _ int) (int, error) {
					time.Sleep(time.Millisecond)
					return i, nil
				},
				func(int, int) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			if got, want := time.Since(start), time.Duration(n/w)*time.Millisecond; got != want {
				t.Errorf("W=%d: %d units of 1 ms took %v, want %v", w, n, got, want)
			}
		})
	}
}
