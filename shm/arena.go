package shm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The unit arena (format 4.2, docs/ring-format.md §8)
//
// A ring slot holds a batch's tensors, so the producer writes each of them
// twice: once where decoding puts a unit's columns, once into the slot.
// A ring of major 4 may instead name a payload that lies in a second
// shared file, the job's arena: the daemon decodes a unit's columns into
// it, and a batch whose rows are a run of one unit's rows points into it
// rather than copying them (tensor entry byte 5, place 1). Every ring of
// a job names the same arena in its header (line 0: arena_id,
// arena_size), and the file's name follows from the id alone
// (ArenaName), so that no name has to fit in the header and none can be
// a ring's name ('+' is not allowed in those).
//
// Invariants:
//   - A range of the arena that a published, unreleased batch names is
//     never written: the producer frees a range only once every ring whose
//     batches name it has released them (head past them). The arena's
//     user (package engine) keeps that account; this package only maps
//     the file and checks that a tensor entry lies inside it.
//   - The arena is created once, with its full size reserved and
//     pre-faulted (as a ring is), owned like the job's rings, and never
//     resized. Line 0 is immutable, so a ring names one arena for life;
//     a producer that adopts a ring (§6.6) writes no place-1 entry,
//     since it cannot know which ranges its predecessor's batches still
//     name.
//
// Rejected: hard links of one arena file under each ring's name (a name
// per ring to find it by; every file under a ring's name must have one
// link, trust.go), and an arena inside each ring file (a unit's rows are
// dealt to every rank's ring, so it would have to be decoded once per
// ring).

// arenaMagic begins every arena file.
var arenaMagic = [8]byte{'L', 'M', 'A', 'R', 'E', 'N', 'A', 1}

// ArenaHeaderSize is the size of an arena's header page: arena offsets
// (tensor entry byte 40 with place 1) are from the start of the file, and
// data begins here.
const ArenaHeaderSize = pageSize

// Arena header offsets (§8.1).
const (
	arenaOffMagic = 0
	arenaOffID    = 8
	arenaOffSize  = 16
)

// Ring header (line 0) offsets of format 4.x (§3.1).
const (
	offArenaID   = 88
	offArenaSize = 96
)

// placeArena is tensor entry byte 5 for a payload in the arena.
const (
	tensorOffPlace = 5
	placeSlot      = 0
	placeArena     = 1
)

// ArenaName returns the file name of the arena with the given id.
func ArenaName(id uint64) string { return "arena+" + fmt.Sprintf("%016x", id) }

// Arena is a job's unit arena, mapped read-write by its producer. Its
// memory is shared with every trainer of the job's rings: write only
// ranges no published, unreleased batch names.
type Arena struct {
	dir      string
	path     string
	id       uint64
	fd       int
	mem      []byte // the whole file
	dev, ino uint64
}

// ArenaConfig describes an arena to create.
type ArenaConfig struct {
	// Dir is the ring directory. Default: DefaultDir().
	Dir string
	// Size is the data bytes, rounded up to a multiple of 4096.
	Size int64
	// Mode is the file's permission bits. Default 0600.
	Mode os.FileMode
	// Claim, if not nil, is called with each id drawn before a file of
	// that name is created: a caller that must be able to remove the
	// arena after it crashes records the id here, durably, first. An
	// error stops the creation.
	Claim func(id uint64) error
}

// CreateArena creates, reserves and pre-faults an arena of cfg.Size data
// bytes under a fresh random id (O_CREAT|O_EXCL, never through a planted
// file). /dev/shm too small for it fails here, naming what to do.
func CreateArena(cfg ArenaConfig) (*Arena, error) {
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir()
	}
	if cfg.Mode == 0 {
		cfg.Mode = 0o600
	}
	if cfg.Size <= 0 || cfg.Size > maxFileSize {
		return nil, fmt.Errorf("create arena: size %d, want 1 to %d bytes", cfg.Size, int64(maxFileSize))
	}
	size := alignUp(cfg.Size, pageSize)
	var a *Arena
	for attempt := 0; a == nil; attempt++ {
		id, err := randomU64()
		if err != nil {
			return nil, err
		}
		if cfg.Claim != nil {
			if err := cfg.Claim(id); err != nil {
				return nil, fmt.Errorf("create arena %s: %w", ArenaName(id), err)
			}
		}
		path := filepath.Join(cfg.Dir, ArenaName(id))
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(cfg.Mode))
		if errors.Is(err, unix.EEXIST) && attempt < 3 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("create arena %s: %w", path, err)
		}
		a = &Arena{dir: cfg.Dir, path: path, id: id, fd: fd}
	}
	fail := func(err error) (*Arena, error) {
		a.Remove()
		return nil, fmt.Errorf("create arena %s: %w", a.path, err)
	}
	if err := unix.Fchmod(a.fd, uint32(cfg.Mode)); err != nil {
		return fail(err)
	}
	if err := reserve(a.fd, ArenaHeaderSize+size); err != nil {
		return fail(arenaSpaceError(cfg.Dir, ArenaHeaderSize+size, err))
	}
	mem, err := mapFile(a.fd, ArenaHeaderSize+size, false)
	if err != nil {
		return fail(err)
	}
	a.mem = mem
	prefault(mem)
	var st unix.Stat_t
	if err := unix.Fstat(a.fd, &st); err != nil {
		return fail(err)
	}
	a.dev, a.ino = st.Dev, st.Ino
	le := binary.LittleEndian
	le.PutUint64(mem[arenaOffID:], a.id)
	le.PutUint64(mem[arenaOffSize:], uint64(size))
	copy(mem[arenaOffMagic:], arenaMagic[:])
	return a, nil
}

// arenaSpaceError explains a failed reservation of an arena of n bytes.
func arenaSpaceError(dir string, n int64, err error) error {
	free := "an unknown number of bytes"
	if f := freeBytes(dir); f >= 0 {
		free = fmt.Sprintf("%d bytes free (%s)", f, sizeString(f))
	}
	return fmt.Errorf("reserve %d bytes (%s) for the unit arena in %s: %w; %s has %s: enlarge it (Docker: --shm-size; "+
		"Kubernetes: an emptyDir with medium Memory; host: mount -o remount,size=... %s) by at least that much, "+
		"or run the job without ring.arena", n, sizeString(n), dir, err, dir, free, dir)
}

// ID returns the arena's id, which names its file.
func (a *Arena) ID() uint64 { return a.id }

// Path returns the arena's file.
func (a *Arena) Path() string { return a.path }

// Data returns the arena's data bytes, after its header: what a producer
// decodes into.
func (a *Arena) Data() []byte { return a.mem[ArenaHeaderSize:] }

// Offset returns the file offset of b, and whether b lies wholly in the
// arena's data.
func (a *Arena) Offset(b []byte) (int64, bool) {
	if a == nil || len(b) == 0 {
		return 0, false
	}
	return offsetIn(a.mem, b)
}

// offsetIn returns where b begins in mem, and whether b lies in mem past
// the arena header.
func offsetIn(mem, b []byte) (int64, bool) {
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < base+ArenaHeaderSize || p-base > uintptr(len(mem)) || uintptr(len(b)) > uintptr(len(mem))-(p-base) {
		return 0, false
	}
	return int64(p - base), true
}

// Close unmaps and closes the arena, leaving its file for the rings that
// name it (their remover calls RemoveArena).
func (a *Arena) Close() {
	if a.mem != nil {
		unix.Munmap(a.mem)
		a.mem = nil
	}
	if a.fd >= 0 {
		unix.Close(a.fd)
		a.fd = -1
	}
}

// RemoveArena unlinks the arena with the given id in dir if it is a
// regular file with one link owned by one of uids (exactly: root is not
// implied), and reports whether it did. Only what knows the arena to be
// a job's may remove it: the id must come from the caller's own record
// (the engine's, the daemon's job record), or, for a ring replaced when
// its producer died, from that ring if the arena has the ring's owner.
// A ring's header is written by its owner, who must not be able to name
// another job's arena to a privileged remover.
func RemoveArena(dir string, id uint64, uids ...uint32) (bool, error) {
	if dir == "" {
		dir = DefaultDir()
	}
	path := filepath.Join(dir, ArenaName(id))
	fd, err := unix.Open(path, unix.O_RDONLY|openExisting, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("remove arena %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, fmt.Errorf("remove arena %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 || !slices.Contains(uids, st.Uid) || !sameFile(path, st.Dev, st.Ino) {
		return false, nil
	}
	if err := unix.Unlink(path); err != nil && !errors.Is(err, unix.ENOENT) {
		return false, fmt.Errorf("remove arena %s: %w", path, err)
	}
	return true, nil
}

// replacedArena is the arena a ring replaced by Create named, and that
// ring's owner (ReplacedArena).
type replacedArena struct {
	id  uint64
	uid uint32
}

// ReplacedArena returns the arena the dead producer's ring that Create
// replaced under this ring's name named, and that ring's owner; 0 when
// none. Its other rings may still name it (an adopted sibling): the
// caller, knowing all of a job's rings, removes it (RemoveArena with that
// owner) only if none of them does.
func (p *Producer) ReplacedArena() (id uint64, uid uint32) { return p.replaced.id, p.replaced.uid }

// NamedArena returns the id of the arena the ring's header names, 0 if
// none: Config.Arena's for a ring Create made, the predecessor's for a
// ring adopted.
func (p *Producer) NamedArena() uint64 { return p.named }

// Chown gives the arena to uid and gid through its open descriptor (no
// name is followed): a daemon gives a job's arena to its owner, as it
// gives the rings.
func (a *Arena) Chown(uid, gid int) error {
	if err := unix.Fchown(a.fd, uid, gid); err != nil {
		return fmt.Errorf("fchown arena %s to %d:%d: %w", a.path, uid, gid, err)
	}
	return nil
}

// idOrZero returns a's id, 0 for a nil arena.
func (a *Arena) idOrZero() uint64 {
	if a == nil {
		return 0
	}
	return a.id
}

// Remove unmaps and closes the arena and unlinks its file if the name is
// still the file this process made. Readers that mapped it keep their
// mapping. Call it once no ring will be opened again that names it: after
// the job's rings are removed.
func (a *Arena) Remove() error {
	a.Close()
	if a.ino != 0 && !sameFile(a.path, a.dev, a.ino) {
		return nil
	}
	if err := unix.Unlink(a.path); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove arena %s: %w", a.path, err)
	}
	return nil
}

// openArena maps the arena a ring's header names (id, data size), after
// the trust checks of every file in the ring directory: shared and
// writable, as the consumer maps its ring, so that a trainer may change
// its batch's tensors in place wherever they lie (§8.3).
func openArena(dir string, id uint64, size int64, owner uint32) ([]byte, error) {
	path := filepath.Join(dir, ArenaName(id))
	fd, st, err := openTrusted(path, unix.O_RDWR, owner)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("the ring names arena %s, which is missing: its producer removed it (the ring was left from a finished run) or it was deleted; %w", path, os.ErrNotExist)
		}
		if errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("the ring names arena %s, which this user (uid %d) may not open for reading and writing: the job belongs to another user, or lastmiled could not give the arena to its owner (its log says why: it needs CAP_CHOWN): %w", path, os.Geteuid(), err)
		}
		return nil, err
	}
	defer unix.Close(fd)
	if st.Size < ArenaHeaderSize+size {
		return nil, fmt.Errorf("%w: arena %s is %d bytes, the ring says %d data bytes after a %d-byte header", ErrTruncated, path, st.Size, size, ArenaHeaderSize)
	}
	mem, err := unix.Mmap(fd, 0, int(ArenaHeaderSize+size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap arena %s: %w", path, err)
	}
	if err := checkArenaHeader(mem, id, size); err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("arena %s: %w", path, err)
	}
	return mem, nil
}

// checkArenaHeader checks an arena's header page against the ring's
// line 0 (§8.1).
func checkArenaHeader(mem []byte, id uint64, size int64) error {
	le := binary.LittleEndian
	switch {
	case len(mem) < ArenaHeaderSize:
		return fmt.Errorf("%w: %d bytes, shorter than the header page", ErrTruncated, len(mem))
	case !bytes.Equal(mem[:len(arenaMagic)], arenaMagic[:]):
		return fmt.Errorf("%w: magic is %q, want %q (not an arena, or not finished)", ErrNotRing, mem[:len(arenaMagic)], arenaMagic[:])
	case le.Uint64(mem[arenaOffID:]) != id:
		return corruptf("arena_id %#x, the ring names %#x", le.Uint64(mem[arenaOffID:]), id)
	case le.Uint64(mem[arenaOffSize:]) != uint64(size):
		return corruptf("arena size %d, the ring says %d", le.Uint64(mem[arenaOffSize:]), size)
	}
	return nil
}

// AddArena appends the next tensor of the batch's table, as Add does, with
// data as its payload in place: data must lie in the ring's arena
// (Config.Arena), aligned to the dtype's size, and be exactly the
// tensor's size. Only dense, values and weights tensors may lie there
// (§8.2). The bytes must stay as they are until the consumer releases the
// batch (Producer.Stats' Head passes it): the arena's user keeps that
// account.
func (s *Slot) AddArena(field int, role Role, dtype DType, data []byte, shape ...int64) error {
	p := s.p
	if !s.live {
		return fmt.Errorf("ring %q: AddArena on a slot that was published, discarded or closed", p.name)
	}
	if !s.set {
		return fmt.Errorf("ring %q: SetRows before AddArena", p.name)
	}
	if s.k >= p.tensorCount {
		return fmt.Errorf("ring %q: batch already has all %d tensors", p.name, p.tensorCount)
	}
	off, ok := p.arena.Offset(data)
	if !ok {
		return fmt.Errorf("ring %q: AddArena: the payload does not lie in the ring's arena", p.name)
	}
	if role != RoleDense && role != RoleValues && role != RoleWeights {
		return fmt.Errorf("ring %q: AddArena: a %v tensor cannot lie in the arena", p.name, role)
	}
	save := s.it
	wantField, wantRole, _ := s.it.next()
	f := &p.fields[wantField]
	if field != wantField || role != wantRole {
		s.it = save
		return fmt.Errorf("ring %q: tensor %d must be field %d (%q) role %v, got field %d role %v",
			p.name, s.k, wantField, f.Name, wantRole, field, role)
	}
	n, err := checkShape(f, role, dtype, shape)
	if err == nil && n != int64(len(data)) {
		err = fmt.Errorf("%d bytes of data for shape %v of %v (%d bytes)", len(data), shapeString(shape), dtype, n)
	}
	if err == nil && off%int64(dtype.Size()) != 0 {
		err = fmt.Errorf("arena offset %d is not a multiple of %v's size", off, dtype)
	}
	if err != nil {
		s.it = save
		return fmt.Errorf("ring %q: field %q %v tensor: %w", p.name, f.Name, role, err)
	}
	s.entry(field, role, dtype, shape, placeArena, off, n)
	return nil
}
