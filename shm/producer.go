package shm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// heartbeatEvery is how often the producer refreshes producer_heartbeat_ns;
// the format requires at least every 100 ms.
const heartbeatEvery = 50 * time.Millisecond

// Producer is the writing end of a ring. Acquire, Slot methods, Publish,
// Discard, WaitDrained, Close, CloseWith and Fail must be called from one
// goroutine at a time, and Close (or CloseWith, Fail) never while Acquire
// or WaitDrained is blocked: cancel their context first. Stats,
// ConsumerAttached, Name and Generation may be called from any goroutine
// at any time, even during or after Close.
type Producer struct {
	name        string
	path        string
	fd          int
	mem         []byte
	r           *ring
	fields      []Field
	tensorCount int
	generation  uint64
	slotSize    int64
	slots       int
	dev, ino    uint64 // identity of our file, so Remove never unlinks a successor
	arena       *Arena // the job's unit arena this ring names (Config.Arena); nil after an adoption
	// named is the arena id the ring's header names (0: none), replaced
	// the arena a dead producer's ring that Create replaced named.
	named    uint64
	replaced replacedArena

	next    uint64        // sequence of the next batch: our copy of tail
	held    [MaxHeld]Slot // reused; batch seq uses held[seq%MaxHeld]
	nheld   int           // slots acquired, neither published nor discarded: seqs next..next+nheld-1
	scratch []Tensor

	lay payloadLayout // layout.go; used by Slot methods only

	life   sync.RWMutex // write-held by Close; read-held by Stats-like methods
	closed bool
	// detached is set by Detach: the mapping is private memory now, so a
	// slot being packed may have been half written to the file and half
	// to it, and nothing published any more reaches a consumer.
	detached atomic.Bool

	hbStop chan struct{}
	hbDone chan struct{}

	published atomic.Uint64
	fullWaits atomic.Uint64
	fullWait  atomic.Int64 // ns, waits that ended
	heldNow   atomic.Int32 // nheld, for Stats
	// waitMu orders a wait's start and end against Stats, which counts a
	// wait under way, so that FullWait never goes back.
	waitMu    sync.Mutex
	waitStart time.Time // the wait under way; zero: none
}

// MaxHeld is the number of slots a producer may hold at once, acquired
// but not yet published: a batcher that must see whether a step of batches
// is the epoch's last before publishing it fills the next while it holds
// one. Held slots are published oldest first and discarded newest first.
const MaxHeld = 2

// Arena returns the arena the ring names and this producer may point
// tensors into (Config.Arena), or nil: none, or a ring this producer
// adopted (§8: an adopting producer writes no arena entries).
func (p *Producer) Arena() *Arena { return p.arena }

// Need returns the slot bytes a batch needs whose tensors, in table order,
// have the given payload sizes; err is a *TooLargeError if that exceeds the
// slot size. It lets a caller reject (or split) a batch before writing it.
func (p *Producer) Need(payloadBytes []int64) (int64, error) {
	if len(payloadBytes) != p.tensorCount {
		return 0, fmt.Errorf("ring %q: %d payload sizes, the schema has %d tensors", p.name, len(payloadBytes), p.tensorCount)
	}
	need := p.layoutNeed(payloadBytes)
	if need > p.slotSize {
		return need, &TooLargeError{Ring: p.name, Need: need, SlotSize: p.slotSize}
	}
	return need, nil
}

// Acquire waits for a free slot and returns it for the next batch. While
// the ring is full (the consumer has not released the slot's previous
// batch) it polls, then sleeps on a futex (pollThenAwait), until the
// consumer releases a batch or ctx is done. Nothing is ever overwritten before the consumer
// released it.
func (p *Producer) Acquire(ctx context.Context) (_ *Slot, err error) {
	defer RecoverFault(debug.SetPanicOnFault(true), &err, p.path)
	if p.closed {
		return nil, fmt.Errorf("ring %q: acquire: %w", p.name, ErrClosed)
	}
	if p.nheld == MaxHeld {
		return nil, fmt.Errorf("ring %q: acquire: batches %d to %d are still held: Publish or Discard one first", p.name, p.next, p.next+MaxHeld-1)
	}
	seq, r := p.next+uint64(p.nheld), p.r
	// head is the consumer's word (the owner of the file may store any
	// value): one beyond the batches published (p.next) breaks the
	// protocol, and would otherwise make the ring look full for ever.
	ready := func() bool { h := r.head.Load(); return h > p.next || seq-h < r.slotCount }
	if !ready() {
		start := time.Now()
		p.waitMu.Lock()
		p.waitStart = start
		p.waitMu.Unlock()
		_, err := pollThenAwait(ctx, r.spaceFutex, r.producerWaiting, ready)
		p.waitMu.Lock()
		p.fullWaits.Add(1)
		p.fullWait.Add(int64(time.Since(start)))
		p.waitStart = time.Time{}
		p.waitMu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("ring %q: wait for a free slot: %w", p.name, err)
		}
	}
	if h := r.head.Load(); h > p.next {
		return nil, p.headBeyondTail("acquire", h)
	}
	s := &p.held[seq%MaxHeld]
	*s = Slot{p: p, seq: seq, mem: r.slot(seq), it: planIter{fields: p.fields}}
	s.used = slotHeaderSize + int64(p.tensorCount)*tensorEntrySize
	s.live = true
	p.nheld++
	p.heldNow.Store(int32(p.nheld))
	return s, nil
}

// Discard gives the most recently acquired slot back unpublished; the next
// Acquire returns the same sequence number. Discarding any other slot (an
// older held one, or one no longer held) does nothing: slots are given back
// newest first, so that held sequence numbers stay contiguous.
func (p *Producer) Discard(s *Slot) {
	if p.nheld > 0 && s == &p.held[(p.next+uint64(p.nheld)-1)%MaxHeld] && s.live {
		s.live = false
		p.nheld--
		p.heldNow.Store(int32(p.nheld))
	}
}

// Publish makes the batch visible to the consumer (§6.1 steps 3-5). It
// first validates the slot exactly as a consumer will (ParseSlot), so a
// producer never publishes a batch its consumer would reject. On error
// nothing is published and the slot stays held: fix it or Discard it.
func (p *Producer) Publish(s *Slot) (err error) {
	defer RecoverFault(debug.SetPanicOnFault(true), &err, p.path)
	if p.closed {
		return fmt.Errorf("ring %q: publish: %w", p.name, ErrClosed)
	}
	if p.nheld == 0 || s != &p.held[p.next%MaxHeld] || !s.live {
		return fmt.Errorf("ring %q: publish: slot is not the oldest one Acquire returned and still held; publish in order", p.name)
	}
	if s.k != p.tensorCount {
		return fmt.Errorf("ring %q: publish batch %d: it has %d of the schema's %d tensors", p.name, s.seq, s.k, p.tensorCount)
	}
	flags := s.cur.Flags &^ FlagPadded
	if s.pad > 0 {
		flags |= FlagPadded
	} else if s.cur.Flags&FlagPadded != 0 {
		return fmt.Errorf("ring %q: publish batch %d: its cursor says padded, but no padding rows were set: call SetPadRows", p.name, s.seq)
	}
	le := binary.LittleEndian
	m := s.mem
	le.PutUint64(m[slotOffUsed:], uint64(s.used))
	le.PutUint32(m[slotOffRows:], uint32(s.rows))
	le.PutUint32(m[slotOffTensors:], uint32(p.tensorCount))
	le.PutUint64(m[slotOffEpoch:], s.cur.Epoch)
	le.PutUint64(m[slotOffBatchIndex:], s.cur.BatchIndex)
	le.PutUint32(m[slotOffRank:], s.cur.Rank)
	le.PutUint32(m[slotOffFlags:], flags)
	le.PutUint32(m[slotOffPadRows:], uint32(s.pad))
	clear(m[slotOffPadRows+4 : slotHeaderSize])
	var arena []byte
	if p.arena != nil {
		arena = p.arena.mem
	}
	if _, p.scratch, err = parseSlot(m, p.fields, p.scratch, VersionMinor, arena); err != nil && !p.detached.Load() {
		return fmt.Errorf("ring %q: publish batch %d: %w", p.name, s.seq, err)
	}
	// Detached mid-pack, the slot may be torn; it is in private memory,
	// which no consumer reads: carry on until the caller stops.
	r := p.r
	r.slotSeq(s.seq).Store(s.seq) // the publish flag, last (§5.1)
	r.tail.Store(s.seq + 1)
	wake(r.dataFutex, r.consumerWaiting)
	p.next++
	s.live = false
	p.nheld--
	p.heldNow.Store(int32(p.nheld))
	p.published.Add(1)
	return nil
}

// WaitDrained blocks until the consumer has released every published batch
// (head == tail), or ctx is done. Use it before Close when the ring's file
// is about to be removed, or to measure end-to-end throughput.
func (p *Producer) WaitDrained(ctx context.Context) (err error) {
	defer RecoverFault(debug.SetPanicOnFault(true), &err, p.path)
	if p.closed {
		return fmt.Errorf("ring %q: wait drained: %w", p.name, ErrClosed)
	}
	r, tail := p.r, p.next
	_, err = await(ctx, r.spaceFutex, r.producerWaiting, func() bool { return r.head.Load() >= tail }, nil)
	if err != nil {
		return fmt.Errorf("ring %q: wait drained: %w", p.name, err)
	}
	if h := r.head.Load(); h > tail {
		return p.headBeyondTail("wait drained", h)
	}
	return nil
}

// headBeyondTail is the error of a consumer whose head (h) passed the
// batches published: it released batches that do not exist.
func (p *Producer) headBeyondTail(op string, h uint64) error {
	return fmt.Errorf("ring %q: %s: %w: the consumer's head %d is beyond the %d batches published (the consumer, or the owner of the ring's file, wrote its head word out of turn)",
		p.name, op, ErrProtocol, h, p.next)
}

// Close ends the stream (state 1): the consumer gets io.EOF after the
// batches already published. It unmaps the ring and drops the producer
// lock; the file stays until Remove. A held slot is discarded. Closing a
// closed Producer does nothing.
func (p *Producer) Close() error { return p.finish(StateEnded, "") }

// CloseWith is Close with a status message for the consumer (for example
// "done: 3 epochs, 1204 batches").
func (p *Producer) CloseWith(msg string) error { return p.finish(StateEnded, msg) }

// Fail ends the stream with an error (state 2): after the batches already
// published the consumer gets a *ProducerError carrying msg (truncated to
// 1020 bytes on a UTF-8 boundary). Then it closes like Close.
func (p *Producer) Fail(msg string) error { return p.finish(StateFailed, msg) }

func (p *Producer) finish(st State, msg string) error {
	p.life.Lock()
	defer p.life.Unlock()
	if p.closed {
		return nil
	}
	for i := range p.held {
		p.held[i].live = false
	}
	p.nheld = 0
	p.heldNow.Store(0)
	ferr := p.writeEnd(st, msg)

	close(p.hbStop)
	<-p.hbDone
	p.closed = true
	err := unix.Munmap(p.mem)
	p.mem, p.r = nil, nil
	// Closing the descriptor drops the byte-0 lock, after the state store.
	if cerr := unix.Close(p.fd); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("close ring %q: %w", p.name, err)
	}
	if ferr != nil {
		return fmt.Errorf("close ring %q: the end of the stream was not written: %w", p.name, ferr)
	}
	return nil
}

// writeEnd writes the stream's end into the header: the message, the end
// time, then the state (finish, with p.life held).
func (p *Producer) writeEnd(st State, msg string) (err error) {
	defer RecoverFault(debug.SetPanicOnFault(true), &err, p.path)
	m := truncateMessage(msg)
	r := p.r
	copy(p.mem[offMessage:offMessage+MaxMessageLen], m)
	u32At(p.mem, offMessageLen).Store(uint32(len(m)))
	u64At(p.mem, offEndedUnixNano).Store(uint64(time.Now().UnixNano()))
	// After the message, the end time and the last tail (§3.5, §6.1). The
	// stream is finished for good: nobody adopts a ring that is not
	// running (adopt.go), so state never goes back to 0 (§6.6).
	r.state.Store(uint32(st))
	wake(r.dataFutex, r.consumerWaiting)
	return nil
}

// truncateMessage makes msg valid UTF-8 of at most MaxMessageLen bytes,
// cutting at a character boundary.
func truncateMessage(msg string) string {
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	if len(msg) <= MaxMessageLen {
		return msg
	}
	n := MaxMessageLen
	for n > 0 && !utf8.RuneStart(msg[n]) {
		n--
	}
	return msg[:n]
}

// Remove unlinks the ring's file if it is still this producer's (a later
// producer may have replaced a closed one). Consumers that have it open
// keep reading it. It may be called before or after Close.
func (p *Producer) Remove() error {
	var st unix.Stat_t
	if err := unix.Lstat(p.path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("remove ring %q: %w", p.name, err)
	}
	if st.Dev != p.dev || st.Ino != p.ino {
		return nil
	}
	if err := unix.Unlink(p.path); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove ring %q: %w", p.name, err)
	}
	return nil
}

func (p *Producer) heartbeat() {
	defer close(p.hbDone)
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-p.hbStop:
			return
		case <-t.C:
			if p.beat() != nil {
				<-p.hbStop // the file is gone under us: beat no more
				return
			}
		}
	}
}

// beat stores the heartbeat (§3.4).
func (p *Producer) beat() (err error) {
	defer RecoverFault(debug.SetPanicOnFault(true), &err, p.path)
	p.r.producerHeartbeat.Store(monotonicNow())
	return nil
}

// Name returns the ring's name.
func (p *Producer) Name() string { return p.name }

// Fd returns the descriptor of the ring's file, for a caller that maps
// the ring itself (device staging registers its own mapping): reopen it
// as /proc/self/fd/N rather than by name. It is valid until Close.
func (p *Producer) Fd() int { return p.fd }

// Path returns the ring file's path.
func (p *Producer) Path() string { return p.path }

// Generation returns the ring's random generation number (§3.1).
func (p *Producer) Generation() uint64 { return p.generation }

// Fields returns the ring's schema. The caller must not modify it.
func (p *Producer) Fields() []Field { return p.fields }

// SlotSize returns the bytes per slot, after rounding.
func (p *Producer) SlotSize() int64 { return p.slotSize }

// Slots returns the number of slots.
func (p *Producer) Slots() int { return p.slots }

// Chown gives the ring's file to uid and gid through the producer's own
// descriptor: the file it created or adopted, whatever its name in the
// ring directory (shared, world-writable: a user may have put a link to
// another file there since) now leads to.
func (p *Producer) Chown(uid, gid int) error {
	p.life.RLock()
	defer p.life.RUnlock()
	if p.closed {
		return fmt.Errorf("chown ring %s: the producer is closed", p.name)
	}
	if err := unix.Fchown(p.fd, uid, gid); err != nil {
		return fmt.Errorf("fchown ring %s to %d:%d: %w", p.path, uid, gid, err)
	}
	return nil
}

// ConsumerAttached reports whether a consumer holds the ring's byte-1 lock.
func (p *Producer) ConsumerAttached() bool {
	p.life.RLock()
	defer p.life.RUnlock()
	if p.closed {
		return false
	}
	locked, err := byteLocked(p.fd, consumerLockByte)
	return err == nil && locked
}

// ProducerStats are the producer's counters, for metrics.
type ProducerStats struct {
	Slots     int
	Published uint64        // batches published by this Producer
	Head      uint64        // batches the consumer has released
	Tail      uint64        // batches published (the header's tail)
	FullWaits uint64        // Acquire calls that slept because the ring was full
	FullWait  time.Duration // total time Acquire slept on a full ring, a wait under way included
	// Held is the slots acquired and not yet published (being filled, or
	// filled and waiting for their turn): the ring is full for the
	// producer when Occupancy() + Held reaches Slots.
	Held int
}

// Occupancy returns the number of published batches the consumer has not
// released yet (0 to Slots, whatever head the consumer stored).
func (s ProducerStats) Occupancy() uint64 { return occupancy(s.Head, s.Tail, s.Slots) }

// Stats returns the producer's counters. After Close, Head and Tail are 0.
func (p *Producer) Stats() (s ProducerStats) {
	defer RecoverFault(debug.SetPanicOnFault(true), nil, p.path) // then Head and Tail read as 0
	p.life.RLock()
	defer p.life.RUnlock()
	s = ProducerStats{
		Slots:     p.slots,
		Published: p.published.Load(),
		FullWaits: p.fullWaits.Load(),
		Held:      int(p.heldNow.Load()),
	}
	p.waitMu.Lock()
	s.FullWait = time.Duration(p.fullWait.Load())
	if !p.waitStart.IsZero() {
		s.FullWait += time.Since(p.waitStart)
	}
	p.waitMu.Unlock()
	if !p.closed {
		s.Head = p.r.head.Load()
		s.Tail = p.r.tail.Load()
	}
	return s
}
