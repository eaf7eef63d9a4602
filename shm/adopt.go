package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Adoption: a new producer continues an existing ring
//
// A ring file outlives its producer: when the daemon is killed (kill -9
// included) or restarts production, the trainer still has the ring mapped,
// with its head, and every published batch is intact. Adoption lets the
// next producer continue that very file instead of replacing it, so the
// consumer's view stays valid: same generation, same head, the published
// slots untouched, and the next batch appears at tail as if nothing had
// happened. A consumer that noticed the gap (ErrProducerDied after 100 ms
// of an unlocked byte 0) reopens the same name and continues at its head.
//
// Rules, in addition to docs/ring-format.md §6:
//
//  1. Only a ring whose byte-0 lock the adopter holds is adopted: a dead
//     producer's (the lock was free), or one handed over by Detach in this
//     process (the lock never dropped).
//  2. The adopter checks the file is a ring of exactly the schema and
//     geometry it would create, that its stream is still running, and that
//     head <= tail <= head + N with batch tail-1 published. Otherwise it
//     falls back to Create, which replaces the file (a new generation).
//  3. It continues at tail. Line 0 stays immutable (the format says so):
//     producer_pid and producer_start keep naming the creator; they are
//     informational, and liveness is the lock.
//  4. Whatever the old producer half-wrote in slot tail % N is invisible
//     (its seq and tail were never stored) and is overwritten.
//
// Detach is the in-process hand-over: it replaces the old producer's
// mapping, at the same address, by private anonymous memory, so that the
// old producer (an engine run being stopped) may go on writing, publishing,
// failing and closing without any of it reaching the file, while a
// duplicate of its descriptor keeps the lock for the next Take. The old
// producer's owner must stop using it soon (cancel its context); its
// Acquire then sleeps on private memory until that context is done.
//
// Claims are descriptors of ring files whose byte-0 lock this process
// holds without a Producer: from Claim (a daemon restarting finds its
// rings) or Detach. Take and Adopt consume them; Unclaim drops one. They
// die with the process, and with them the locks.

// RingInfo is a snapshot of a ring file, for a daemon deciding how to
// resume and for metrics.
type RingInfo struct {
	Name, Path string
	Generation uint64
	Slots      int
	SlotSize   int64
	FileSize   int64
	SchemaHash uint64
	Head, Tail uint64
	State      State
	Message    string // the status message (§3.5)
	// Ended is when the stream left state running (ended_unix_ns, format
	// x.1); zero while it runs, and for a ring of format x.0.
	Ended time.Time
	// ProducerAlive: another open file holds byte 0 (the producer lock).
	ProducerAlive bool
	// ConsumerAttached: another open file holds byte 1 (the consumer lock).
	ConsumerAttached bool
	// ConsumerPID is the pid the attached consumer recorded (consumer_pid,
	// §3.3), 0 when no consumer is attached: a consumer that died leaves
	// its pid in the header, which means nothing once its lock is gone.
	ConsumerPID int32
	// ConsumerWaiting: the consumer is asleep on an empty ring now.
	ConsumerWaiting bool
	// Last is the cursor of batch tail-1, if HasLast.
	Last    Cursor
	HasLast bool
	// Next is the cursor of batch head, the next the consumer gets, if
	// HasNext (head < tail).
	Next    Cursor
	HasNext bool
	// Prev is the cursor of batch head-1, the last one the consumer
	// released, if HasPrev (its slot was not reused yet).
	Prev    Cursor
	HasPrev bool
	// Owner is the file's uid and gid.
	UID, GID uint32
	Dev, Ino uint64
}

// Occupancy returns the published batches not yet released, 0 to Slots.
// Head is the consumer's word: one beyond Tail (a protocol violation)
// counts as 0, never as a wrapped-around difference.
func (i RingInfo) Occupancy() uint64 { return occupancy(i.Head, i.Tail, i.Slots) }

// occupancy is tail - head bounded to 0..slots: the consumer (or the
// owner of the file) may store any head.
func occupancy(head, tail uint64, slots int) uint64 {
	if head >= tail {
		return 0
	}
	return min(tail-head, uint64(max(slots, 0)))
}

type claim struct {
	fd       int
	dev, ino uint64
}

var claims struct {
	sync.Mutex
	m map[string]claim // by path
}

func putClaim(path string, c claim) {
	claims.Lock()
	defer claims.Unlock()
	if claims.m == nil {
		claims.m = make(map[string]claim)
	}
	if old, ok := claims.m[path]; ok {
		unix.Close(old.fd)
	}
	claims.m[path] = c
}

func takeClaim(path string) (claim, bool) {
	claims.Lock()
	defer claims.Unlock()
	c, ok := claims.m[path]
	if ok {
		delete(claims.m, path)
	}
	return c, ok
}

// Claim takes the producer lock of the existing ring dir/name, whose
// producer must be dead, and keeps it for a later Take or Adopt in this
// process (Unclaim gives it up). It returns the ring's state. It fails
// with ErrInUse if a producer lives, os.ErrNotExist if there is no file,
// ErrUntrusted if the file is a symbolic link, has other hard links or is
// owned by someone other than owner, this process's user or root (see
// Config.Owner), and ErrNotRing (or another parse error) if the file is
// not a valid ring.
func Claim(dir, name string, owner uint32) (RingInfo, error) {
	if dir == "" {
		dir = DefaultDir()
	}
	fail := func(err error) (RingInfo, error) {
		return RingInfo{}, fmt.Errorf("claim ring %q: %w", name, err)
	}
	if err := validRingName(name); err != nil {
		return fail(err)
	}
	path := filepath.Join(dir, name)
	fd, _, err := openTrusted(path, unix.O_RDWR, owner)
	if err != nil {
		return fail(err)
	}
	if err := lockByte(fd, producerLockByte); err != nil {
		unix.Close(fd)
		if err == errLocked {
			return fail(fmt.Errorf("%w: %s has a live producer", ErrInUse, path))
		}
		return fail(fmt.Errorf("lock %s: %w", path, err))
	}
	info, err := inspectFd(fd, name, path)
	if err != nil {
		unix.Close(fd)
		return fail(err)
	}
	putClaim(path, claim{fd: fd, dev: info.Dev, ino: info.Ino})
	return info, nil
}

// Unclaim drops this process's claim on dir/name, if any, releasing the
// producer lock.
func Unclaim(dir, name string) {
	if dir == "" {
		dir = DefaultDir()
	}
	if c, ok := takeClaim(filepath.Join(dir, name)); ok {
		unix.Close(c.fd)
	}
}

// Take returns a producer for the ring cfg describes: the claimed ring
// (Claim, Detach) adopted if this process holds a claim on it, else a new
// one from Create. Without claims it is exactly Create, so a program that
// never claims keeps Create's semantics.
func Take(cfg Config) (*Producer, error) {
	dir := cfg.Dir
	if dir == "" {
		dir = DefaultDir()
	}
	c, ok := takeClaim(filepath.Join(dir, cfg.Name))
	if !ok {
		return Create(cfg)
	}
	return adoptClaim(cfg, c)
}

// Adopt returns a producer that continues the existing ring cfg describes,
// if it can (see the rules at the top of this file): the file is a ring of
// the same schema hash and geometry whose producer is dead (or which this
// process claimed), and its stream is still running. It takes the lock and
// continues at tail, keeping the generation, head and published slots.
// Otherwise it falls back to Create. A ring with a live producer fails with
// ErrInUse, as with Create; a file Create would not replace (one that is
// not a ring, or is not trusted: see Config.Owner) fails as with Create.
func Adopt(cfg Config) (*Producer, error) {
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir()
	}
	if err := validRingName(cfg.Name); err != nil {
		return nil, fmt.Errorf("adopt ring %q: %w", cfg.Name, err)
	}
	path := filepath.Join(cfg.Dir, cfg.Name)
	if c, ok := takeClaim(path); ok {
		return adoptClaim(cfg, c)
	}
	fd, st, err := openTrusted(path, unix.O_RDWR, cfg.Owner)
	if errors.Is(err, os.ErrNotExist) {
		return Create(cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("adopt ring %q: %w", cfg.Name, err)
	}
	if err := lockByte(fd, producerLockByte); err != nil {
		unix.Close(fd)
		if err == errLocked {
			return nil, fmt.Errorf("adopt ring %q: %w: %s belongs to a live producer: stop it, or choose another ring name", cfg.Name, ErrInUse, path)
		}
		return nil, fmt.Errorf("adopt ring %q: lock %s: %w", cfg.Name, path, err)
	}
	return adoptClaim(cfg, claim{fd: fd, dev: st.Dev, ino: st.Ino})
}

// adoptClaim adopts the ring whose locked descriptor c holds, or, if it is
// not adoptable, drops the lock and creates a new ring (which replaces the
// file, its lock being free now).
func adoptClaim(cfg Config, c claim) (*Producer, error) {
	p, err := adoptFd(cfg, c)
	if err != nil {
		unix.Close(c.fd) // drops the lock: Create may replace the stale file
		return Create(cfg)
	}
	return p, nil
}

// adoptFd builds a Producer on the locked descriptor c if the ring is
// adoptable; it takes ownership of c.fd only on success.
func adoptFd(cfg Config, c claim) (*Producer, error) {
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir()
	}
	if cfg.Slots == 0 {
		cfg.Slots = defaultSlots
	}
	if err := validateFields(cfg.Fields); err != nil {
		return nil, err
	}
	path := filepath.Join(cfg.Dir, cfg.Name)
	if !sameFile(path, c.dev, c.ino) {
		return nil, errors.New("the file was replaced")
	}
	schema := encodeSchema(cfg.Fields)
	g, err := computeGeometry(cfg.Slots, cfg.SlotSize, len(schema))
	if err != nil {
		return nil, err
	}
	var fst unix.Stat_t
	if err := unix.Fstat(c.fd, &fst); err != nil {
		return nil, err
	}
	if fst.Size != g.fileSize {
		return nil, fmt.Errorf("file size %d, want %d", fst.Size, g.fileSize)
	}
	mem, err := mapFile(c.fd, g.fileSize, false)
	if err != nil {
		return nil, err
	}
	hdr, err := takeMapped(mem, g, schemaHash(schema), path)
	if err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	r := newRing(mem, g.slotCount, g.slotSize, g.dataOffset)
	p := &Producer{
		name:        cfg.Name,
		path:        path,
		fd:          c.fd,
		mem:         mem,
		r:           r,
		fields:      cloneFields(cfg.Fields),
		tensorCount: TensorCount(cfg.Fields),
		generation:  hdr.Generation,
		slotSize:    g.slotSize,
		slots:       g.slotCount,
		dev:         c.dev,
		ino:         c.ino,
		named:       hdr.ArenaID,
		next:        r.tail.Load(),
		hbStop:      make(chan struct{}),
		hbDone:      make(chan struct{}),
	}
	for i := range p.held {
		p.held[i].p = p
	}
	p.withdrawInherited() // its predecessor's resources died with it (announce.go)
	go p.heartbeat()
	return p, nil
}

// takeMapped checks the mapped ring mem before adopting it, pre-faults it
// and beats its heartbeat. The file is its owner's, who may shrink it
// meanwhile: a fault is an error (fault.go).
func takeMapped(mem []byte, g geometry, hash uint64, path string) (hdr Header, err error) {
	defer RecoverFault(debug.SetPanicOnFault(true), &err, path)
	if hdr, err = ParseHeader(mem, g.fileSize); err != nil {
		return hdr, err
	}
	if err := checkAdoptable(mem, hdr, g, hash); err != nil {
		return hdr, err
	}
	prefault(mem)
	newRing(mem, g.slotCount, g.slotSize, g.dataOffset).producerHeartbeat.Store(monotonicNow())
	return hdr, nil
}

// checkAdoptable applies rule 2.
func checkAdoptable(mem []byte, hdr Header, g geometry, hash uint64) error {
	switch {
	case hdr.SchemaHash != hash:
		return fmt.Errorf("%w: the ring's schema differs", ErrSchemaHash)
	case hdr.SlotCount != g.slotCount || hdr.SlotSize != g.slotSize || hdr.DataOffset != g.dataOffset:
		return fmt.Errorf("geometry %d x %d at %d, want %d x %d at %d",
			hdr.SlotCount, hdr.SlotSize, hdr.DataOffset, g.slotCount, g.slotSize, g.dataOffset)
	}
	r := newRing(mem, g.slotCount, g.slotSize, g.dataOffset)
	if st := State(r.state.Load()); st != StateRunning {
		return fmt.Errorf("the stream has %v", st)
	}
	head, tail := r.head.Load(), r.tail.Load()
	if tail < head || tail-head > r.slotCount {
		return fmt.Errorf("%w: head %d, tail %d", ErrProtocol, head, tail)
	}
	if tail > 0 && r.slotSeq(tail-1).Load() != tail-1 {
		return fmt.Errorf("%w: batch %d is not published in its slot", ErrProtocol, tail-1)
	}
	return nil
}

// LastCursor returns the cursor of the last published batch (tail-1) and
// true, or false if none was published. Call it from the producer's
// goroutine; the slot cannot change under it, because the producer
// overwrites it only after publishing N more batches.
func (p *Producer) LastCursor() (c Cursor, ok bool) {
	defer RecoverFault(debug.SetPanicOnFault(true), nil, p.path) // then none
	if p.closed || p.next == 0 {
		return Cursor{}, false
	}
	return slotCursor(p.r.slot(p.next - 1)), true
}

// Detach hands the ring over to the next Take or Adopt of the same path
// in this process, without ever dropping the producer lock, and returns the
// ring's state as of the hand-over. From then on nothing p does reaches the
// file: its mapping is replaced by private memory at the same address (see
// the top of this file). p's owner must stop using it (cancel the context
// of a blocked Acquire) and may still Close or Fail it, which then only
// releases its memory and descriptor. Detach may be called from any
// goroutine, while p's owner is using p.
func (p *Producer) Detach() (RingInfo, error) {
	p.life.Lock()
	defer p.life.Unlock()
	if p.closed {
		return RingInfo{}, fmt.Errorf("ring %q: detach: %w", p.name, ErrClosed)
	}
	fd, err := unix.FcntlInt(uintptr(p.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return RingInfo{}, fmt.Errorf("ring %q: detach: dup: %w", p.name, err)
	}
	// MAP_FIXED replaces the pages atomically: a store of the old producer
	// lands either in the file (before) or in private memory (after).
	p.detached.Store(true) // before the swap: a Publish that sees the private memory sees the flag
	_, err = unix.MmapPtr(-1, 0, unsafe.Pointer(&p.mem[0]), uintptr(len(p.mem)),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED)
	if err != nil {
		p.detached.Store(false)
		unix.Close(fd)
		return RingInfo{}, fmt.Errorf("ring %q: detach: replace mapping: %w", p.name, err)
	}
	info, err := inspectFd(fd, p.name, p.path)
	if err != nil {
		// The file is ours and was valid; keep the lock anyway so that
		// Take decides (it falls back to Create).
		info = RingInfo{Name: p.name, Path: p.path, Dev: p.dev, Ino: p.ino}
	}
	putClaim(p.path, claim{fd: fd, dev: p.dev, ino: p.ino})
	return info, nil
}

// slotCursor reads the cursor of a slot's header.
func slotCursor(slot []byte) Cursor {
	le := binary.LittleEndian
	return Cursor{
		Epoch:      le.Uint64(slot[slotOffEpoch:]),
		BatchIndex: le.Uint64(slot[slotOffBatchIndex:]),
		Rank:       le.Uint32(slot[slotOffRank:]),
		Flags:      le.Uint32(slot[slotOffFlags:]),
	}
}
