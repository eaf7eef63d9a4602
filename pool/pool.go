package pool

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// Config sizes a Run.
type Config struct {
	// Workers is the number of goroutines that call work. It must be at
	// least 1: size it with cpus.Available() for CPU-bound units. Run starts
	// no more than n of them.
	Workers int

	// InFlight bounds memory: it is the most units whose results exist at
	// once, counted from the moment work starts on a unit until emit for it
	// returns, and so the number of result buffers that circulate. Zero
	// means 2*Workers. It must be at least Workers: with fewer, workers
	// would sit idle. More lets fast units run ahead of a slow one: a unit
	// may start only while it is fewer than InFlight units ahead of the
	// next one to be emitted.
	InFlight int
}

// Validate reports whether c is usable, naming the field that is not.
func (c Config) Validate() error {
	if c.Workers < 1 {
		return fmt.Errorf("pool: Workers is %d; it must be at least 1 (size it with cpus.Available())", c.Workers)
	}
	if c.InFlight != 0 && c.InFlight < c.Workers {
		return fmt.Errorf("pool: InFlight is %d, below Workers (%d); raise InFlight or leave it 0 for 2*Workers", c.InFlight, c.Workers)
	}
	return nil
}

// UnitError is the error Run returns when a unit fails: Op is "work" when
// the unit's work function returned an error or panicked, "emit" when emit
// returned one. Index is the unit's index, which is also the number of
// units whose results were emitted successfully before it.
type UnitError struct {
	Index int
	Op    string
	Err   error
}

func (e *UnitError) Error() string {
	if e.Op == "emit" {
		return fmt.Sprintf("emit unit %d: %v", e.Index, e.Err)
	}
	return fmt.Sprintf("work on unit %d: %v", e.Index, e.Err)
}

func (e *UnitError) Unwrap() error { return e.Err }

// PanicError is the error a work function's panic becomes: the value passed
// to panic and the stack of the goroutine that panicked.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("panic: %v\n\ngoroutine stack:\n%s", e.Value, e.Stack)
}

// Unwrap returns the panic value if it is an error, so errors.Is sees
// through a panic(err).
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// errGoexit is the error of a unit whose work function called
// runtime.Goexit (t.FailNow in a test, for instance) instead of returning.
var errGoexit = errors.New("work function called runtime.Goexit")

// Run calls work(ctx, worker, i, buf) for every i in [0, n) on
// min(cfg.Workers, n) goroutines, and emit(i, r) with each result, in order
// i = 0, 1, ..., n-1, on the calling goroutine. It returns when every unit
// has been emitted, or when it stops early; either way, every call to work
// has returned and every goroutine it started has exited by then.
//
// worker is the index of the calling goroutine, in [0, min(cfg.Workers, n)),
// for per-worker scratch state: calls with the same worker never overlap.
// Units are claimed in increasing order of i but may start and finish in
// any order.
//
// Buffers circulate: buf is the result of unit i-InFlight, passed back after
// emit for it returned (the zero R for the first InFlight units), so that
// work can reset and refill it instead of allocating. Consequently emit must
// not keep r, or memory r refers to, after it returns, unless work never
// reuses buf. At most InFlight results exist at once (see Config.InFlight).
//
// The ctx passed to work is canceled when Run stops. Run stops at the first
// failure in plan order, which makes what it emits deterministic:
//
//   - If work for unit k returns an error or panics, and every unit before
//     k succeeds, Run emits exactly units 0..k-1 and returns a *UnitError
//     with Index k and Op "work" wrapping the error (a *PanicError for a
//     panic). No unit after k starts once k has failed; those already
//     running are not emitted, and their ctx is canceled when Run stops.
//     Units before k still run: if one of them fails too, it is the one
//     reported, whichever failed first in time.
//   - If emit returns an error for unit i, Run returns a *UnitError with
//     Index i and Op "emit" at once.
//   - If ctx is done before every unit has been emitted, Run stops promptly
//     (without waiting for units it has no use for, beyond letting running
//     work calls return) and returns ctx.Err(), whatever else failed.
//
// A panic in emit is not recovered: Run stops its workers and lets it
// propagate to the caller. n == 0 returns nil without calling work or emit;
// n < 0 and an invalid cfg return an error.
func Run[R any](ctx context.Context, cfg Config, n int,
	work func(ctx context.Context, worker, i int, buf R) (R, error),
	emit func(i int, r R) error,
) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("pool: n is %d; it must be at least 0", n)
	}
	if n == 0 {
		return nil
	}
	inFlight := cfg.InFlight
	if inFlight == 0 {
		inFlight = 2 * cfg.Workers
	}
	workers := min(cfg.Workers, n)
	k := min(inFlight, n) // still >= workers

	runCtx, cancel := context.WithCancel(ctx)
	r := &run[R]{
		ctx:      runCtx,
		n:        int64(n),
		k:        int64(k),
		work:     work,
		slots:    make([]slot[R], k),
		emitWake: make(chan struct{}, 1),
		wake:     make([]chan struct{}, workers),
	}
	r.failAt.Store(int64(n))
	for i := range r.slots {
		r.slots[i].seq.Store(2 * int64(i))
	}
	for w := range r.wake {
		r.wake[w] = make(chan struct{}, 1)
	}
	r.wg.Add(workers)
	for w := range workers {
		go r.worker(w)
	}
	defer func() {
		cancel()
		r.wg.Wait()
	}()

	done := ctx.Done()
	for e := int64(0); e < r.n; e++ {
		s := &r.slots[e%r.k]
		if s.seq.Load() != 2*e+1 && !r.waitFilled(s, e, done) {
			return ctx.Err()
		}
		select {
		case <-done:
			return ctx.Err()
		default:
		}
		if s.err != nil {
			if err := ctx.Err(); err != nil {
				return err
			}
			return &UnitError{Index: int(e), Op: "work", Err: s.err}
		}
		if err := emit(int(e), s.buf); err != nil {
			if err := ctx.Err(); err != nil {
				return err
			}
			return &UnitError{Index: int(e), Op: "emit", Err: err}
		}
		if u := e + r.k; u < r.n {
			s.seq.Store(2 * u)
			p := &s.worker[(u/r.k)&1]
			if w := p.Load(); w != 0 && p.CompareAndSwap(w, 0) {
				r.wake[w-1] <- struct{}{}
			}
		}
	}
	return nil
}

// The protocol
//
// Units are numbered 0..n-1 in plan order. K = InFlight slots form a ring,
// and unit i uses slot i%K. Each slot has a sequence word seq:
//
//	seq == 2i    the slot is free for unit i: i < K, or emit(i-K) returned
//	seq == 2i+1  the slot holds unit i's result (buf, err)
//
// A worker loops:
//
//  1. Claim: i = next.Add(1) - 1. Exit if i >= n, or if i > failAt (a unit
//     before i failed, so the emitter will never want i).
//  2. Wait until seq == 2i: the bounded-memory window, i < emitted + K.
//     One atomic load when the slot is free; otherwise park (below).
//  3. Call work(ctx, w, i, buf) with the slot's buf, the result of unit i-K.
//     Store the result and the error in the slot; on error lower failAt to i.
//  4. Publish: seq = 2i+1, then wake the emitter if it is parked on the slot.
//
// The emitter, on the caller's goroutine, for e = 0, 1, ..., n-1:
//
//  1. Wait until slot e%K has seq == 2e+1 (park if not).
//  2. If the slot holds an error, stop with it. Otherwise call emit(e, buf).
//  3. Free: seq = 2(e+K), then wake the worker parked for unit e+K, if any.
//
// Invariants:
//
//   - Each index is claimed exactly once: the counter hands out each value
//     once, and whoever claims i either works on it or exits.
//   - Each index is emitted at most once, in order, and, unless Run stops,
//     exactly once: only the emitter emits, and it advances e by one only
//     after seeing seq == 2e+1, which only the worker that claimed e stores,
//     once. If a unit before e failed, or fails later, the emitter stops at
//     it before reaching e.
//   - At most K results are live: work(i) starts only once seq == 2i, which
//     the emitter stores after emit(i-K) returned. The live units lie in
//     [e, e+K), one per slot, and each slot owns one buffer.
//   - Claimed but unemitted units lie in [e, next), and next-e <= K+W: each
//     such unit is either finished (in [e, e+K), at most K) or held by a
//     worker (at most W, one each). With K >= W that interval is at most 2K
//     long, so at most two workers ever wait for the same slot, and for
//     consecutive generations i/K: hence two parking flags per slot, chosen
//     by the parity of i/K. (One flag is not enough: a worker that read seq
//     just before the slot was freed for its unit i can still be on its way
//     to park while another worker parks for i+K.)
//   - Run stops only after every worker has exited; workers exit only on
//     the conditions of step 1 or when Run's ctx is canceled, which the
//     emitter does on its way out. A unit before failAt is always finished
//     by the worker that claimed it, so the emitter never waits for a unit
//     nobody will finish.
//
// Memory ordering. Go's sync/atomic operations are sequentially consistent
// and a load that observes a store happens after it. The worker's plain
// writes of buf and err precede its store of 2i+1; the emitter reads them
// after loading 2i+1. emit's last use of buf precedes the store of 2(e+K);
// the worker for e+K reads buf after loading it. So buf and err need no
// lock, and neither does emit's reuse contract.
//
// Parking, without lost wake-ups. The waiter stores its flag, re-checks seq,
// and only then blocks on its doorbell, a channel of capacity 1 (one per
// worker, one for the emitter). The other side stores seq, then takes the
// flag with CompareAndSwap and, if it got it, sends one token. Sequential
// consistency means that either the waiter's re-check sees the new seq or
// the other side sees the flag. When both happen the waiter retracts its
// flag with CompareAndSwap; if that fails the token is already on its way
// and the waiter receives it, so a doorbell never holds a stale token for a
// later wait. In the steady state, when the window is open and results are
// ready, nobody parks: a unit costs one Add, a handful of atomic loads and
// stores, and no lock.
//
// Errors. failAt only decreases, and a worker skips i only if i > failAt,
// so every unit up to the final failAt is worked; the emitter meets the
// lowest failing unit in order and stops there. That makes the emitted
// prefix and the returned error a function of the inputs, not of timing.
// Run's own ctx is canceled when the emitter stops (not when a unit fails,
// which would cancel the units before it that it still has to emit).
//
// Designs rejected:
//
//   - A mutex and a min-heap (or map) of finished results, popped while the
//     top is the next index. Every unit takes the lock twice and pays
//     O(log n); a slow unit lets the heap grow with every unit behind it
//     unless claims are gated too, which is this design with a lock.
//   - Workers sending results on one channel, the emitter reordering them
//     in a map. The map is unbounded for the same reason: memory follows
//     the skew between the slowest unit and the rest, the failure mode of
//     loaders that spill their object store (ray#40754).
//   - One goroutine per unit under a semaphore (errgroup.SetLimit). It
//     still needs the reorder stage; it spawns a goroutine per unit and
//     gives no stable worker index for per-worker decoder state.
//   - A semaphore channel of K tokens for the window plus a done channel
//     per slot. Correct and simple, and the first thing to try; but every
//     unit makes four channel operations, each under the channel's lock,
//     and the workers and the emitter contend on the semaphore. Measured
//     (docs/pool.md): equal at the default window, where parking dominates
//     both, and 3x the per-unit cost when nobody has to wait.
//   - One parking flag per slot. See the invariants: a worker racing to
//     park for a slot that was just freed for it can meet the worker of
//     the next generation; the stress test caught it as a BUG panic.

// cacheLine is the padding that keeps neighbouring slots, which the emitter
// and the workers touch at the same time, off each other's cache lines.
const cacheLine = 64

// slot is one entry of the reorder ring; unit i uses slot i%K.
type slot[R any] struct {
	// seq is 2*i while the slot is free for unit i, 2*i+1 once it holds
	// unit i's result in buf and err.
	seq atomic.Int64
	// emitter is 1 while the emitter is parked, or about to park, waiting
	// for this slot to be filled. worker[g&1] is w+1 while worker w is
	// parked, or about to park, waiting for the slot to be freed for a
	// unit of generation g = i/K. Whoever changes seq takes the flag with
	// a CompareAndSwap and rings the parked goroutine's doorbell.
	emitter atomic.Int32
	worker  [2]atomic.Int32
	buf     R
	err     error
	_       [cacheLine]byte
}

type run[R any] struct {
	ctx  context.Context // canceled when Run stops
	n, k int64
	work func(ctx context.Context, worker, i int, buf R) (R, error)

	next   atomic.Int64 // the next index to claim
	failAt atomic.Int64 // the lowest index whose work failed; n if none

	slots    []slot[R]
	emitWake chan struct{}   // the emitter's doorbell, capacity 1
	wake     []chan struct{} // worker w's doorbell, capacity 1
	wg       sync.WaitGroup
}

func (r *run[R]) worker(w int) {
	defer r.wg.Done()
	// A fault at an unexpected address (work writing into a mapped file
	// that another process shrank: lastmile's unit arenas) panics, to be
	// recovered as the unit's error by do, instead of killing the process.
	debug.SetPanicOnFault(true)
	done := r.ctx.Done()
	for {
		select {
		case <-done:
			return
		default:
		}
		i := r.next.Add(1) - 1
		if i >= r.n || i > r.failAt.Load() {
			return // nothing left, or nothing the emitter will ever want
		}
		s := &r.slots[i%r.k]
		if s.seq.Load() != 2*i && !r.waitFree(s, i, w, done) {
			return
		}
		r.do(s, w, i)
	}
}

// do runs unit i in slot s and publishes its result, also when work panics
// or calls runtime.Goexit.
func (r *run[R]) do(s *slot[R], w int, i int64) {
	returned := false
	defer func() {
		if returned {
			return
		}
		var err error = errGoexit
		if p := recover(); p != nil {
			err = &PanicError{Value: p, Stack: debug.Stack()}
		}
		var zero R
		s.buf, s.err = zero, err
		r.fail(i)
		r.publish(s, i)
	}()
	buf, err := r.work(r.ctx, w, int(i), s.buf)
	returned = true
	s.buf, s.err = buf, err
	if err != nil {
		r.fail(i)
	}
	r.publish(s, i)
}

// publish marks slot s as holding unit i's result and wakes the emitter if
// it waits for it.
func (r *run[R]) publish(s *slot[R], i int64) {
	s.seq.Store(2*i + 1)
	if s.emitter.Load() != 0 && s.emitter.CompareAndSwap(1, 0) {
		r.emitWake <- struct{}{}
	}
}

// fail lowers failAt to i.
func (r *run[R]) fail(i int64) {
	for {
		cur := r.failAt.Load()
		if i >= cur || r.failAt.CompareAndSwap(cur, i) {
			return
		}
	}
}

// waitFree parks worker w until slot s is free for unit i. It returns false
// if done is closed first.
func (r *run[R]) waitFree(s *slot[R], i int64, w int, done <-chan struct{}) bool {
	id := int32(w + 1)
	p := &s.worker[(i/r.k)&1]
	for s.seq.Load() != 2*i {
		if !p.CompareAndSwap(0, id) {
			panic("BUG: pool: two workers wait for one slot and generation")
		}
		if s.seq.Load() == 2*i {
			if !p.CompareAndSwap(id, 0) {
				<-r.wake[w] // the emitter took the flag; its token is on the way
			}
			return true
		}
		select {
		case <-r.wake[w]:
		case <-done:
			p.CompareAndSwap(id, 0)
			return false
		}
	}
	return true
}

// waitFilled parks the emitter until slot s holds unit e's result. It
// returns false if done is closed first.
func (r *run[R]) waitFilled(s *slot[R], e int64, done <-chan struct{}) bool {
	for s.seq.Load() != 2*e+1 {
		s.emitter.Store(1)
		if s.seq.Load() == 2*e+1 {
			if !s.emitter.CompareAndSwap(1, 0) {
				<-r.emitWake // a worker took the flag; its token is on the way
			}
			return true
		}
		select {
		case <-r.emitWake:
		case <-done:
			s.emitter.CompareAndSwap(1, 0)
			return false
		}
	}
	return true
}
