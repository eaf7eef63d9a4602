package shm

import (
	"fmt"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Inspect returns a snapshot of the ring dir/name without taking any lock
// or writing anything: for status pages, metrics and a daemon deciding how
// to resume. Counters are read atomically; the cursors of batches head and
// tail-1 are exact while no consumer releases and no producer publishes,
// and otherwise best effort (they are re-checked against the slot's seq).
func Inspect(dir, name string) (RingInfo, error) {
	o, err := Observe(dir, name)
	if err != nil {
		return RingInfo{}, err
	}
	defer o.Close()
	return o.Info(), nil
}

// Observer is a read-only view of a ring kept open for repeated,
// cheap snapshots (a metrics sampler reads consumer_waiting a hundred
// times a second). It maps the file read-only and never writes or locks
// it. Its methods may be called from any goroutine.
type Observer struct {
	name, path string
	fd         int
	mem        []byte
	r          *ring
	hdr        Header
	size       int64
	uid, gid   uint32
	dev, ino   uint64

	mu     sync.RWMutex
	closed bool
}

// Observe opens a read-only view of the ring dir/name.
func Observe(dir, name string) (*Observer, error) {
	if dir == "" {
		dir = DefaultDir()
	}
	fail := func(err error) (*Observer, error) {
		return nil, fmt.Errorf("observe ring %q: %w", name, err)
	}
	if err := validRingName(name); err != nil {
		return fail(err)
	}
	path := filepath.Join(dir, name)
	// Read-only, so any owner will do, but never through a link, and never
	// blocked by a FIFO planted under the name (trust.go).
	fd, err := unix.Open(path, unix.O_RDONLY|openExisting, 0)
	if err != nil {
		return fail(openError(path, err))
	}
	o, err := observeFd(fd, name, path)
	if err != nil {
		unix.Close(fd)
		return fail(err)
	}
	return o, nil
}

func observeFd(fd int, name, path string) (*Observer, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%w: %s is not a regular file but a %s", ErrUntrusted, path, fileKind(st.Mode))
	}
	if st.Size < pageSize {
		return nil, fmt.Errorf("%s: %w: %d bytes", path, ErrTruncated, st.Size)
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	hdr, err := parseMapped(mem, st.Size, path)
	if err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Observer{
		name: name, path: path, fd: fd, mem: mem, hdr: hdr, size: st.Size,
		r:   newRing(mem, hdr.SlotCount, hdr.SlotSize, hdr.DataOffset),
		uid: st.Uid, gid: st.Gid, dev: st.Dev, ino: st.Ino,
	}, nil
}

// parseMapped is ParseHeader of a mapped file that its owner may shrink
// under us (fault.go).
func parseMapped(mem []byte, size int64, path string) (hdr Header, err error) {
	defer RecoverFault(debug.SetPanicOnFault(true), &err, path)
	return ParseHeader(mem, size)
}

// inspectFd snapshots the ring open on fd (which the caller keeps).
func inspectFd(fd int, name, path string) (RingInfo, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return RingInfo{}, fmt.Errorf("dup: %w", err)
	}
	o, err := observeFd(dup, name, path)
	if err != nil {
		unix.Close(dup)
		return RingInfo{}, err
	}
	defer o.Close()
	return o.Info(), nil
}

// Header returns the ring's parsed header.
func (o *Observer) Header() Header { return o.hdr }

// Info returns a snapshot of the ring (see Inspect). After Close it
// returns the identity fields only.
func (o *Observer) Info() (info RingInfo) {
	id := RingInfo{
		Name: o.name, Path: o.path, Generation: o.hdr.Generation, Slots: o.hdr.SlotCount,
		SlotSize: o.hdr.SlotSize, FileSize: o.size, SchemaHash: o.hdr.SchemaHash,
		UID: o.uid, GID: o.gid, Dev: o.dev, Ino: o.ino,
	}
	// A fault (the file shrunk under the view) gives the identity fields
	// only, as after Close, never a half-read snapshot.
	var fault error
	defer func() {
		if fault != nil {
			info = id
		}
	}()
	defer RecoverFault(debug.SetPanicOnFault(true), &fault, o.path)
	info = id
	o.mu.RLock()
	defer o.mu.RUnlock()
	if o.closed {
		return info
	}
	r := o.r
	info.State = State(r.state.Load())
	info.Tail = r.tail.Load()
	info.Head = r.head.Load()
	info.ConsumerPID = r.consumerPID.Load()
	info.ConsumerWaiting = r.consumerWaiting.Load() != 0
	if info.State != StateRunning {
		n := min(u32At(o.mem, offMessageLen).Load(), MaxMessageLen)
		info.Message = string(o.mem[offMessage : offMessage+n])
		if ns := u64At(o.mem, offEndedUnixNano).Load(); ns != 0 {
			info.Ended = time.Unix(0, int64(ns))
		}
	}
	if info.Tail > 0 {
		info.Last, info.HasLast = readCursor(r, info.Tail-1)
	}
	if info.Head > 0 {
		info.Prev, info.HasPrev = readCursor(r, info.Head-1)
	}
	if info.Head < info.Tail {
		info.Next, info.HasNext = readCursor(r, info.Head)
		if r.head.Load() != info.Head {
			info.HasNext = false
		}
	}
	info.ProducerAlive, _ = byteLocked(o.fd, producerLockByte)
	info.ConsumerAttached, _ = byteLocked(o.fd, consumerLockByte)
	if !info.ConsumerAttached {
		info.ConsumerPID = 0 // a dead consumer's, or 0 already (§3.3)
	}
	return info
}

// ConsumerWaiting reports whether the consumer is asleep on an empty ring
// right now: the stall a trainer's GPU idles through.
func (o *Observer) ConsumerWaiting() (waiting bool) {
	defer RecoverFault(debug.SetPanicOnFault(true), nil, o.path) // then false
	o.mu.RLock()
	defer o.mu.RUnlock()
	if o.closed {
		return false
	}
	return o.r.consumerWaiting.Load() != 0 && o.r.head.Load() == o.r.tail.Load()
}

// ConsumerState returns the consumer's head (the batches it released),
// the producer's tail (the batches published) and whether the consumer is
// asleep on an empty ring right now (as ConsumerWaiting). head is the
// consumer's word, in a file its owner may write: a head beyond tail (or
// one that goes back) breaks the protocol, and must never size a loop or
// an allocation.
func (o *Observer) ConsumerState() (head, tail uint64, waiting bool) {
	var fault error
	defer func() {
		if fault != nil { // the file shrunk under the view: nothing, as after Close
			head, tail, waiting = 0, 0, false
		}
	}()
	defer RecoverFault(debug.SetPanicOnFault(true), &fault, o.path)
	o.mu.RLock()
	defer o.mu.RUnlock()
	if o.closed {
		return 0, 0, false
	}
	head, tail = o.r.head.Load(), o.r.tail.Load()
	return head, tail, o.r.consumerWaiting.Load() != 0 && head == tail
}

// Replaced reports whether the ring's path no longer names the observed
// file (it was removed, or a new ring was created under that name).
func (o *Observer) Replaced() bool {
	return !sameFile(o.path, o.dev, o.ino)
}

// Close unmaps the view. Closing twice does nothing.
func (o *Observer) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil
	}
	o.closed = true
	err := unix.Munmap(o.mem)
	o.mem, o.r = nil, nil
	if cerr := unix.Close(o.fd); err == nil {
		err = cerr
	}
	return err
}

// readCursor reads the cursor of published batch s, checking that its slot
// still holds s before and after.
func readCursor(r *ring, s uint64) (Cursor, bool) {
	seq := r.slotSeq(s)
	if seq.Load() != s {
		return Cursor{}, false
	}
	c := slotCursor(r.slot(s))
	if seq.Load() != s {
		return Cursor{}, false
	}
	return c, true
}
