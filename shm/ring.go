package shm

import (
	"context"
	"sync/atomic"
	"time"
	"unsafe"
)

// The ring protocol
//
// One producer process and one consumer process share a file mapping: page
// 0 holds the counters, then the schema, then N fixed-size slots. Batch s
// lives in slot s % N. docs/ring-format.md is the contract; this comment
// says why the Go side does what it does.
//
// Invariants
//
//  1. Every shared word has exactly one writer: tail, data_futex,
//     producer_waiting, producer_heartbeat_ns, state and the message belong
//     to the producer; head, space_futex, consumer_waiting,
//     consumer_heartbeat_ns and consumer_pid to the consumer. Nobody ever
//     does a read-modify-write on a word another process writes.
//  2. head <= tail <= head + N. The producer writes slot s only while
//     s < head + N, i.e. after the consumer released batch s - N: nothing
//     is ever overwritten before the consumer is done with it.
//  3. Slot s % N is readable exactly when its seq word equals s. seq is
//     stored last, after the payloads, table and slot header; tail after
//     seq. A producer that dies half-way through a slot leaves seq and tail
//     untouched, so a torn batch is never visible.
//  4. state changes from running only after the last tail store. A
//     consumer therefore looks at state only once head == tail, and so
//     delivers every published batch before reporting the end, an error or
//     the producer's death.
//
// Steps (§6.1, §6.2): the producer waits for tail - head < N, fills the
// slot with plain stores, stores seq, stores tail, bumps data_futex and
// wakes the consumer if consumer_waiting is set. The consumer loads tail,
// checks seq == head, reads, then stores head + 1, bumps space_futex and
// wakes the producer if producer_waiting is set.
//
// Memory ordering
//
// Go's sync/atomic operations are sequentially consistent: on amd64 a
// store is an XCHG and an add a LOCK XADD, both full barriers, and loads
// are plain MOVs (acquire under TSO); on arm64 Go uses LDAR/STLR and
// LDADDAL, which are ordered among themselves the same way. So:
//
//   - plain payload stores, then atomic store of seq: a consumer that loads
//     seq == s (atomically) sees the payloads (release/acquire);
//   - the waker's "bump futex word; load *_waiting" and the sleeper's
//     "store *_waiting = 1; load futex word; re-check condition" are both
//     separated by full barriers, which is the Dekker pattern: at least one
//     side sees the other's store, so either the sleeper sees the new
//     condition or the waker sees the flag and calls FUTEX_WAKE. And if the
//     bump lands between the sleeper's load of the futex word and its
//     FUTEX_WAIT, the kernel refuses to sleep (the word no longer holds the
//     value). A wake-up is never lost; the 100 ms timeout is only for the
//     liveness check.
//   - the Go memory model says nothing about other processes; the argument
//     above rests on the hardware model, which is why every shared word is
//     accessed with sync/atomic through a pointer into the mapping and
//     never cached in a Go variable across a wait.
//
// No Go pointer is ever stored in the mapping, and the mapping is never
// touched after munmap: Close stops the heartbeat goroutine and waits for
// it before unmapping.
//
// Liveness
//
// The producer holds an open-file-description write lock on byte 0 of the
// file, the consumer on byte 1. The kernel drops a lock when its holder
// dies, however it dies (SIGKILL, OOM kill), which a heartbeat alone cannot
// tell apart from a long pause. So a consumer that has been waiting 100 ms
// probes byte 0 with F_OFD_GETLK; if it is free, it re-loads state and tail
// (the producer stores them before its lock is dropped, and the probe is a
// syscall that orders them) and reports ErrProducerDied only if the stream
// is still running and empty. The heartbeat age, producer_pid and
// producer_start are reported for diagnosis only: pids are reused and
// namespaced, and only the lock says for sure whether the producer lives.
//
// Rejected designs
//
//   - A pipe or Unix socket per batch: every byte crosses the kernel twice
//     (copy in, copy out), and a 4 MiB batch becomes hundreds of syscalls.
//     The trainer also wants the batch in memory it can pin and hand to
//     cudaMemcpyAsync; a socket buffer is not that.
//   - A new mmap (or memfd) per batch: the first touch of a fresh page costs
//     about 3 µs per 4 KiB (15x a memcpy into warm pages), plus munmap and
//     TLB shootdowns, and a pinned (cudaHostRegister) range would have to
//     be registered again per batch. The ring maps once and touches every
//     page once at creation.
//   - tail alone as the publish flag: enough for a correct producer, but
//     then a reader cannot check a slot by itself. With a per-slot seq
//     (the Disruptor's answer) a second writer, a buggy client or a slot
//     left from an earlier generation shows as seq != head and is reported
//     instead of being read as garbage, for one extra store per batch.
//   - Spinning or polling with sleeps: both burn a core on a 2-core host
//     (polling also adds latency). Futexes sleep in the kernel and cost a
//     syscall only when the other side says it is waiting.
//   - A semaphore or pthread mutex in shared memory: a holder that dies
//     leaves it locked, and Python cannot use one portably. Futex words
//     plus record locks cannot deadlock on death.
//   - Liveness by heartbeat or pid only: a heartbeat cannot tell a dead
//     producer from a stopped one (SIGSTOP, a debugger, a long GC), and
//     pids are reused and namespaced. Record locks are dropped by the
//     kernel exactly when the holder dies.

// ring gives typed, atomic access to the shared words of a mapping.
type ring struct {
	mem        []byte
	slotCount  uint64
	slotSize   int64
	dataOffset int64

	tail              *atomic.Uint64
	dataFutex         *atomic.Uint32
	producerWaiting   *atomic.Uint32
	producerHeartbeat *atomic.Uint64
	state             *atomic.Uint32

	head              *atomic.Uint64
	spaceFutex        *atomic.Uint32
	consumerWaiting   *atomic.Uint32
	consumerHeartbeat *atomic.Uint64
	consumerPID       *atomic.Int32
}

func u64At(mem []byte, off int64) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&mem[off]))
}

func u32At(mem []byte, off int64) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&mem[off]))
}

func newRing(mem []byte, slotCount int, slotSize, dataOffset int64) *ring {
	return &ring{
		mem:               mem,
		slotCount:         uint64(slotCount),
		slotSize:          slotSize,
		dataOffset:        dataOffset,
		tail:              u64At(mem, offTail),
		dataFutex:         u32At(mem, offDataFutex),
		producerWaiting:   u32At(mem, offProducerWaiting),
		producerHeartbeat: u64At(mem, offProducerHeartbeat),
		state:             u32At(mem, offState),
		head:              u64At(mem, offHead),
		spaceFutex:        u32At(mem, offSpaceFutex),
		consumerWaiting:   u32At(mem, offConsumerWaiting),
		consumerHeartbeat: u64At(mem, offConsumerHeartbeat),
		consumerPID:       (*atomic.Int32)(unsafe.Pointer(&mem[offConsumerPID])),
	}
}

// slot returns the bytes of the slot that holds sequence seq.
func (r *ring) slot(seq uint64) []byte {
	off := r.dataOffset + int64(seq%r.slotCount)*r.slotSize
	return r.mem[off : off+r.slotSize : off+r.slotSize]
}

// slotSeq returns the publish word of the slot that holds sequence seq.
func (r *ring) slotSeq(seq uint64) *atomic.Uint64 {
	return u64At(r.mem, r.dataOffset+int64(seq%r.slotCount)*r.slotSize+slotOffSeq)
}

const (
	// waitTimeout is the FUTEX_WAIT timeout; it is also how often a waiting
	// consumer checks the producer's liveness (§6.3).
	waitTimeout = 100 * time.Millisecond
	// spinFor is how long a waiter re-checks its condition before parking.
	spinFor = 20 * time.Microsecond
	// pollFor, pollMin and pollMax shape how a producer waits for a free
	// slot before it parks (pollThenAwait).
	pollFor = 250 * time.Millisecond
	pollMin = 50 * time.Microsecond
	pollMax = 2 * time.Millisecond
)

// pollThenAwait is how a producer waits for a free slot. The cost of a
// wait must land on the producer, never on the trainer: a trainer whose
// training step is the bottleneck keeps the ring full, so every batch it
// releases finds the producer waiting, and a FUTEX_WAKE there is a system
// call plus a cross-CPU wake-up (about 30 µs on a cold CPU of a VM) paid
// in the trainer's process, once per batch, for nothing the trainer needs.
//
// So for the first pollFor of a wait the producer polls: it re-checks
// ready after sleeping (timer sleeps, starting at pollMin and doubling up
// to pollMax) and does not announce itself in producer_waiting, so the
// consumer's release (§6.2 step 3) sees 0 and makes no system call. The
// price is at most pollMax of delay before a freed slot is refilled, which
// a full ring absorbs (the consumer still has the other slots' batches),
// and a few hundred timer wake-ups a second in the daemon while it is
// ahead of its trainer, i.e. while it has CPU to spare. Only a wait longer
// than pollFor (a trainer paused for evaluation or a checkpoint) parks on
// the futex as §6.3 describes, and then the consumer's next release wakes
// it once.
//
// Rejected: parking at once (the trainer pays a wake per batch, above);
// polling for ever (a paused trainer would cost the daemon wake-ups for
// nothing); polling at a fixed short period (wasted wake-ups when the
// trainer's step is long, which the doubling avoids).
func pollThenAwait(ctx context.Context, word, waiting *atomic.Uint32, ready func() bool) (bool, error) {
	if ready() {
		return false, nil
	}
	start := time.Now()
	for d := pollMin; time.Since(start) < pollFor; d = min(2*d, pollMax) {
		if err := ctx.Err(); err != nil {
			return true, err
		}
		time.Sleep(d)
		if ready() {
			return true, nil
		}
	}
	return await(ctx, word, waiting, ready, nil)
}

// wake bumps the futex word the peer sleeps on and wakes it if it says it is
// waiting (§6.1 step 5, §6.2 step 3). The Add is a full barrier, so the
// load of waiting cannot be ordered before it.
func wake(word, waiting *atomic.Uint32) {
	word.Add(1)
	if waiting.Load() != 0 {
		futexWake(word, 1)
	}
}

// spin polls ready for up to spinFor and reports whether it became true.
func spin(ready func() bool) bool {
	if ready() {
		return true
	}
	start := time.Now()
	for time.Since(start) < spinFor {
		for range 64 {
			if ready() {
				return true
			}
		}
	}
	return false
}

// sleepUntil is await for a waiter that must not block a thread in the
// kernel (Consumer.SleepWhileEmpty): after the same spin it sleeps in
// steps of 50 µs doubling to 1 ms, calling onTimeout about every
// waitTimeout.
func sleepUntil(ctx context.Context, ready func() bool, onTimeout func() error) (bool, error) {
	if spin(ready) {
		return false, nil
	}
	step, check := 50*time.Microsecond, time.Now().Add(waitTimeout)
	t := time.NewTimer(step)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-t.C:
		}
		if ready() {
			return true, nil
		}
		if now := time.Now(); now.After(check) && onTimeout != nil {
			if err := onTimeout(); err != nil {
				return true, err
			}
			check = now.Add(waitTimeout)
		}
		step = min(2*step, time.Millisecond)
		t.Reset(step)
	}
}

// await blocks until ready returns true, following §6.3: spin briefly,
// then announce waiting, load the futex word, re-check, and sleep on the
// word for at most waitTimeout. After every timeout it calls onTimeout (if
// not nil); an error from it ends the wait. ctx cancels the wait: the sleep
// is cut short by waking our own futex word, which is harmless to the peer.
// It returns whether it had to park, for the wait metrics.
func await(ctx context.Context, word, waiting *atomic.Uint32, ready func() bool, onTimeout func() error) (bool, error) {
	if spin(ready) {
		return false, nil
	}
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { futexWake(word, 1<<30) })
		defer stop()
	}
	for {
		if err := ctx.Err(); err != nil {
			return true, err
		}
		waiting.Store(1)
		v := word.Load()
		if ready() {
			waiting.Store(0)
			return true, nil
		}
		timedOut := futexWait(word, v, waitTimeout)
		waiting.Store(0)
		if ready() {
			return true, nil
		}
		if timedOut && onTimeout != nil {
			if err := onTimeout(); err != nil {
				return true, err
			}
		}
	}
}
