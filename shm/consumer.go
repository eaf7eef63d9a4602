package shm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// OpenOptions adjust Open.
type OpenOptions struct {
	// Schema, if not nil, is the schema the caller expects; Open fails with
	// ErrSchemaHash if the ring's differs.
	Schema []Field
	// Owner is a uid, besides this process's effective uid and root, that
	// may own the ring file: the producer's, when it does not give the ring
	// to its reader. A file owned by anyone else (someone may have planted
	// it under the ring's name), a symbolic link, or a file with other
	// hard links is refused with ErrUntrusted. The zero value adds no one.
	Owner uint32
}

// Consumer is the reading end of a ring. Next, Release and Close must be
// called from one goroutine at a time, and Close never while Next is
// blocked (cancel its context first). Stats may be called from any
// goroutine at any time.
type Consumer struct {
	name string
	path string
	fd   int
	mem  []byte
	r    *ring
	hdr  Header
	// arena maps the job's unit arena (whole file), for a ring
	// of major 4 that names one (§8); else nil.
	arena []byte

	dev, ino uint64 // the file's identity, to tell when its name was given to a new ring
	// leftover describes the ring when WaitOpen attached to a leftover
	// of an earlier run (§6.7), else "".
	leftover string

	head  uint64 // our copy of head: we are its only writer
	held  bool   // batch head is delivered and not yet released
	batch Batch
	err   error // sticky: end of stream, producer error or death, protocol error

	life   sync.RWMutex
	closed bool

	delivered  atomic.Uint64
	emptyWaits atomic.Uint64
	emptyWait  atomic.Int64 // ns

	sleepy bool // SleepWhileEmpty
	// unread delivers batches with their sequence only, the slot neither
	// parsed nor touched: RunDrainConsumer's, whose reading is not what
	// is measured.
	unread bool
}

// SleepWhileEmpty makes Next wait for a batch by sleeping in short steps
// (50 µs, doubling to 1 ms) instead of on the futex. It is for consumers
// inside a process that also produces or computes, such as lastmile
// plan's simulated trainers: a goroutine blocked in the futex system call
// keeps its scheduler slot (P) until the runtime hands it off, idling a
// core the process was given, while a sleeping goroutine gives it up at
// once. A batch is seen up to a step late, and the producer is not told
// that a consumer waits (no futex wake, no stall in lastmiled's sampling).
// Trainers in their own process keep the futex.
func (c *Consumer) SleepWhileEmpty() { c.sleepy = true }

// Batch is one batch, read in place: every Data slice is a view into the
// shared slot, valid until the batch is released (the next call to Next,
// Release or Close). Copy what must outlive that.
type Batch struct {
	Seq  uint64
	Rows int
	// PadRows is how many of the batch's last rows are padding (§5.1,
	// batch.last: pad): rows [Rows-PadRows, Rows) repeat earlier rows of
	// the epoch. It is -1 for a padded batch of a ring of format 1.0 or
	// 2.0, which does not say how many; use RealRows.
	PadRows   int
	Cursor    Cursor
	UsedBytes int64
	Tensors   []Tensor // in table order (§5.2)
	// Slot is the slot's used bytes, header and table included: one copy of
	// it (for example one cudaMemcpyAsync) moves the whole batch.
	Slot []byte
}

// RealRows returns the number of rows that are not padding, rows [0, n),
// which is what a trainer counts in its loss and metrics, and true; or
// Rows and false for a padded batch of a format x.0 ring, whose producer
// did not say how many rows are padding.
func (b *Batch) RealRows() (n int, known bool) {
	if b.PadRows < 0 {
		return b.Rows, false
	}
	return b.Rows - b.PadRows, true
}

// Tensor returns the batch's tensor of the named field with the given role,
// or nil.
func (b *Batch) Tensor(name string, role Role) *Tensor {
	for i := range b.Tensors {
		if t := &b.Tensors[i]; t.Name == name && t.Role == role {
			return t
		}
	}
	return nil
}

// Open attaches a consumer to the ring dir/name (dir "" means DefaultDir()).
// See OpenWith.
func Open(dir, name string) (*Consumer, error) { return OpenWith(dir, name, OpenOptions{}) }

// OpenWith attaches a consumer to the ring dir/name. It validates the
// header and schema (§6.5), then takes the consumer lock: a ring has at
// most one consumer, and a second one fails with ErrInUse naming the first
// one's pid. A consumer may attach at any time; it resumes at head, the
// first batch no consumer has released. The file must be trusted: see
// OpenOptions.Owner.
func OpenWith(dir, name string, opts OpenOptions) (*Consumer, error) {
	if dir == "" {
		dir = DefaultDir()
	}
	fail := func(err error) (*Consumer, error) {
		return nil, fmt.Errorf("open ring %q: %w", name, err)
	}
	if err := validRingName(name); err != nil {
		return fail(err)
	}
	path := filepath.Join(dir, name)
	fd, st, err := openTrusted(path, unix.O_RDWR, opts.Owner)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fail(fmt.Errorf("no ring at %s: is its producer running, with the same LASTMILE_SHM_DIR? %w", path, os.ErrNotExist))
		}
		return fail(err)
	}
	ok := false
	var mem []byte
	defer func() {
		if !ok {
			if mem != nil {
				unix.Munmap(mem)
			}
			unix.Close(fd)
		}
	}()
	if st.Size < pageSize {
		b := make([]byte, st.Size)
		n, _ := unix.Pread(fd, b, 0)
		_, err := ParseHeader(b[:max(n, 0)], st.Size)
		return fail(fmt.Errorf("%s: %w", path, err))
	}
	// MAP_POPULATE faults the whole ring in now, so that reading a slot
	// never pays a first-touch page fault.
	mem, err = mapFile(fd, st.Size, true)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", path, err))
	}
	hdr, err := ParseHeader(mem, st.Size)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", path, err))
	}
	if opts.Schema != nil {
		if want := schemaHash(encodeSchema(opts.Schema)); want != hdr.SchemaHash {
			return fail(fmt.Errorf("%w: the ring's schema (hash %#x, %d fields) is not the expected one (hash %#x, %d fields): the producer and this reader disagree on the columns",
				ErrSchemaHash, hdr.SchemaHash, len(hdr.Fields), want, len(opts.Schema)))
		}
	}
	var arena []byte
	if hdr.ArenaID != 0 {
		if arena, err = openArena(dir, hdr.ArenaID, hdr.ArenaSize, opts.Owner); err != nil {
			return fail(fmt.Errorf("%s: %w", path, err))
		}
		defer func() {
			if !ok {
				unix.Munmap(arena)
			}
		}()
	}
	r := newRing(mem, hdr.SlotCount, hdr.SlotSize, hdr.DataOffset)
	if err := lockByte(fd, consumerLockByte); err != nil {
		if err == errLocked {
			return fail(fmt.Errorf("%w: it already has a consumer (%s); a ring has one consumer: stop that one, or give this reader its own ring",
				ErrInUse, describeConsumer(r.consumerPID.Load())))
		}
		return fail(fmt.Errorf("lock %s: %w", path, err))
	}
	r.consumerPID.Store(int32(os.Getpid()))
	r.consumerHeartbeat.Store(monotonicNow())
	ok = true
	c := &Consumer{
		name:  name,
		path:  path,
		fd:    fd,
		mem:   mem,
		arena: arena,
		r:     r,
		hdr:   hdr,
		dev:   st.Dev,
		ino:   st.Ino,
		head:  r.head.Load(),
	}
	c.batch.Tensors = make([]Tensor, 0, TensorCount(hdr.Fields))
	return c, nil
}

// Next releases the previous batch, if any, and returns the next one,
// waiting for the producer to publish it (asleep on a futex, burning no
// CPU) until ctx is done. Every published batch is delivered, once and in
// order, before the end of the stream is reported: then Next returns
// io.EOF if the producer closed the ring, a *ProducerError (ErrProducerFailed)
// with its message if it failed, or a *ProducerDiedError (ErrProducerDied)
// if it died. A slot whose sequence is not the expected one is never read:
// Next returns ErrProtocol. These outcomes are final; a cancelled ctx is not.
func (c *Consumer) Next(ctx context.Context) (*Batch, error) {
	if c.closed {
		return nil, fmt.Errorf("ring %q: next: %w", c.name, ErrClosed)
	}
	c.Release()
	if c.err != nil {
		return nil, c.err
	}
	r, h := c.r, c.head
	ready := func() bool { return r.tail.Load() != h || r.state.Load() != uint32(StateRunning) }
	start := time.Now()
	var parked bool
	var err error
	if c.sleepy {
		parked, err = sleepUntil(ctx, ready, c.checkProducer)
	} else {
		parked, err = await(ctx, r.dataFutex, r.consumerWaiting, ready, c.checkProducer)
	}
	if parked {
		c.emptyWaits.Add(1)
		c.emptyWait.Add(int64(time.Since(start)))
	}
	if err != nil {
		if errors.Is(err, ErrProducerDied) {
			c.err = err
			return nil, err
		}
		return nil, fmt.Errorf("ring %q: wait for a batch: %w", c.name, err)
	}
	// state before tail: state leaves running only after the last tail
	// store, so a tail loaded after a final state is the final tail.
	st := State(r.state.Load())
	tail := r.tail.Load()
	switch {
	case tail > h && tail-h <= r.slotCount:
		return c.take(h, tail)
	case tail != h:
		c.err = fmt.Errorf("%w: ring %q: tail %d, head %d, %d slots: the ring was written by something else than one lastmile producer",
			ErrProtocol, c.name, tail, h, r.slotCount)
	case st == StateEnded:
		c.err = io.EOF
	case st == StateFailed:
		c.err = &ProducerError{Ring: c.name, Message: c.message()}
	default:
		c.err = fmt.Errorf("%w: ring %q: unknown state %d", ErrProtocol, c.name, uint32(st))
	}
	return nil, c.err
}

// take delivers batch h (§6.2 steps 1-2).
func (c *Consumer) take(h, tail uint64) (*Batch, error) {
	r := c.r
	if seq := r.slotSeq(h).Load(); seq != h {
		c.err = fmt.Errorf("%w: ring %q: slot %d holds sequence %d, want %d (tail %d); the slot was not read",
			ErrProtocol, c.name, h%r.slotCount, int64(seq), h, tail)
		return nil, c.err
	}
	if c.unread {
		c.batch = Batch{Seq: h}
		c.held = true
		c.delivered.Add(1)
		return &c.batch, nil
	}
	mem := r.slot(h)
	sh, tensors, err := parseSlot(mem, c.hdr.Fields, c.batch.Tensors, c.hdr.VersionMinor, c.arena)
	if err != nil {
		c.err = fmt.Errorf("ring %q: batch %d: %w", c.name, h, err)
		return nil, c.err
	}
	pad := sh.PadRows
	if c.hdr.VersionMinor == 0 && sh.Cursor.Flags&FlagPadded != 0 {
		pad = -1 // x.0: padded, but how many rows is not written
	}
	c.batch = Batch{
		Seq:       h,
		Rows:      sh.Rows,
		PadRows:   pad,
		Cursor:    sh.Cursor,
		UsedBytes: sh.UsedBytes,
		Tensors:   tensors,
		Slot:      mem[:sh.UsedBytes:sh.UsedBytes],
	}
	c.held = true
	c.delivered.Add(1)
	return &c.batch, nil
}

// checkProducer runs after every 100 ms without news (§6.4): it refreshes
// the consumer's heartbeat and reports the producer's death.
func (c *Consumer) checkProducer() error {
	r := c.r
	r.consumerHeartbeat.Store(monotonicNow())
	locked, err := byteLocked(c.fd, producerLockByte)
	if err != nil || locked {
		return nil
	}
	// The lock is free. The producer stored its last tail and state before
	// the kernel dropped the lock, and the probe is a syscall: loads made
	// now see them. Only a stream still running and empty means death;
	// anything else is a clean end that the caller picks up.
	if r.state.Load() != uint32(StateRunning) || r.tail.Load() != c.head {
		return nil
	}
	return &ProducerDiedError{
		Ring:         c.name,
		PID:          c.hdr.ProducerPID,
		Published:    c.head,
		HeartbeatAge: heartbeatAge(r.producerHeartbeat.Load()),
		Replaced:     !sameFile(c.path, c.dev, c.ino),
	}
}

// Release gives the current batch's slot back to the producer (§6.2 step
// 3). Its views must not be used afterwards. Releasing when no batch is
// held does nothing.
func (c *Consumer) Release() {
	if !c.held || c.closed {
		return
	}
	c.held = false
	c.head++
	r := c.r
	r.head.Store(c.head)
	wake(r.spaceFutex, r.producerWaiting)
	r.consumerHeartbeat.Store(monotonicNow())
}

// Message returns the producer's status message (§3.5): the reason of a
// failure, or what it said when it closed the stream.
func (c *Consumer) Message() string {
	if c.closed {
		return ""
	}
	return c.message()
}

func (c *Consumer) message() string {
	n := min(u32At(c.mem, offMessageLen).Load(), MaxMessageLen)
	return string(c.mem[offMessage : offMessage+n])
}

// Close releases the current batch, detaches (the next consumer resumes at
// the first unreleased batch), unmaps the ring and drops the consumer lock.
// Closing a closed Consumer does nothing.
func (c *Consumer) Close() error {
	c.Release()
	c.life.Lock()
	defer c.life.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.r.consumerPID.Store(0)
	err := unix.Munmap(c.mem)
	if c.arena != nil {
		unix.Munmap(c.arena)
	}
	c.mem, c.r, c.arena = nil, nil, nil
	if cerr := unix.Close(c.fd); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("close ring %q: %w", c.name, err)
	}
	return nil
}

// Leftover returns, when WaitOpen attached to a leftover ring of an
// earlier run because no new ring replaced it in time (§6.7), a sentence
// saying so for the operator; else "".
func (c *Consumer) Leftover() string { return c.leftover }

// Header returns the ring's parsed header and schema.
func (c *Consumer) Header() Header { return c.hdr }

// Name returns the ring's name.
func (c *Consumer) Name() string { return c.name }

// ConsumerStats are the consumer's counters, for metrics.
type ConsumerStats struct {
	Slots                int
	Delivered            uint64        // batches Next returned
	Head                 uint64        // batches released (the header's head)
	Tail                 uint64        // batches published
	EmptyWaits           uint64        // Next calls that slept because the ring was empty
	EmptyWait            time.Duration // total time Next slept on an empty ring
	ProducerHeartbeatAge time.Duration
}

// Stats returns the consumer's counters. After Close, Head, Tail and the
// heartbeat age are 0.
func (c *Consumer) Stats() ConsumerStats {
	c.life.RLock()
	defer c.life.RUnlock()
	s := ConsumerStats{
		Slots:      c.hdr.SlotCount,
		Delivered:  c.delivered.Load(),
		EmptyWaits: c.emptyWaits.Load(),
		EmptyWait:  time.Duration(c.emptyWait.Load()),
	}
	if !c.closed {
		s.Head = c.r.head.Load()
		s.Tail = c.r.tail.Load()
		s.ProducerHeartbeatAge = heartbeatAge(c.r.producerHeartbeat.Load())
	}
	return s
}

// describeConsumer names the holder of a ring's consumer lock for an error,
// from the pid it recorded (§3.3). That pid is only a hint: a consumer
// stores it after taking the lock (0 until then), in its own pid
// namespace, and the lock belongs to an open file description, which a
// fork shares, so the recorded process may be gone while a child that
// inherited its descriptor still holds the lock.
func describeConsumer(pid int32) string {
	switch {
	case pid <= 0:
		return "it has not recorded its pid yet"
	case unix.Kill(int(pid), 0) == unix.ESRCH:
		return fmt.Sprintf("pid %d recorded it, but that process is gone: a process that inherited its descriptor (a fork) holds the lock", pid)
	}
	return fmt.Sprintf("pid %d", pid)
}
