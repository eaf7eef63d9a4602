package shm

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Config describes a ring to create.
type Config struct {
	// Dir is the directory of the ring file. Default: DefaultDir().
	Dir string
	// Name is the ring's name: 1 to 200 bytes of [A-Za-z0-9._-], not
	// starting with '.'. The file is Dir/Name.
	Name string
	// Slots is the number of slots, 1 to 65536. Default 4.
	Slots int
	// SlotSize is the bytes per slot, rounded up by RoundSlotSize: to 4096,
	// or to a multiple of 2 MiB from 2 MiB up. It must hold the largest
	// batch, its tensor table and alignment padding included (SlotBytes).
	SlotSize int64
	// Mode is the file's permission bits. Default 0600 (set exactly, not
	// filtered by the umask).
	Mode os.FileMode
	// Owner is the uid, besides this process's effective uid and root,
	// that may own an existing file under the ring's name for Create to
	// replace it as a stale ring, or for Adopt and Take to continue it: the
	// user a daemon gives its rings to (fchown). A file owned by anyone
	// else, a symbolic link, or a file with other hard links is never
	// opened for writing, reused or replaced (ErrUntrusted; trust.go). The
	// zero value adds no one (0 is root).
	Owner uint32
	// Fields is the schema every batch follows.
	Fields []Field
	// Arena, if not nil, is the job's unit arena (arena.go): the ring is
	// format 4.2 and names it, and Slot.AddArena may point tensors into
	// it. Every ring of a job names the same arena.
	Arena *Arena
}

// DefaultDir returns $LASTMILE_SHM_DIR if set, else /dev/shm.
func DefaultDir() string {
	if d := os.Getenv("LASTMILE_SHM_DIR"); d != "" {
		return d
	}
	return "/dev/shm"
}

const defaultSlots = 4

// Create creates the ring cfg describes and returns its producer. The file
// is built under a temporary name, its full size reserved with fallocate,
// mapped once with every page faulted in, written (magic last), locked and
// then renamed into place, so a consumer never sees a partial ring and a
// small /dev/shm fails here rather than with SIGBUS later.
//
// If Dir/Name exists: when its byte-0 lock is free its producer is dead and
// the stale ring is replaced; when it is held, Create fails with ErrInUse
// naming the owner's pid. A file that is not a lastmile ring is never
// replaced, nor is a symbolic link, a file with other hard links or one
// owned by an untrusted user (ErrUntrusted; see Config.Owner): Create
// fails naming it. Nothing planted under the name is ever written through.
func Create(cfg Config) (*Producer, error) {
	cfg, schema, g, err := prepareCreate(cfg)
	if err != nil {
		return nil, fmt.Errorf("create ring %q: %w", cfg.Name, err)
	}
	fail := func(err error) (*Producer, error) {
		return nil, fmt.Errorf("create ring %q: %w", cfg.Name, err)
	}
	path := filepath.Join(cfg.Dir, cfg.Name)

	removeStaleTemps(cfg.Dir, cfg.Name, cfg.Owner)
	old, err := claimName(path, cfg.Owner)
	if err != nil {
		return fail(err)
	}
	// A stale ring stays locked until after the rename, so that a second
	// producer racing to reclaim it finds it locked.
	defer func() { old.release() }()

	b, err := buildTemp(cfg, schema, g)
	if err != nil {
		return fail(err)
	}
	if old, err = installRing(b.tmp, path, old, cfg.Owner); err != nil {
		b.discard()
		return fail(err)
	}
	var replaced replacedArena
	if old != nil && old.arena != 0 {
		replaced = replacedArena{id: old.arena, uid: old.uid}
	}
	var st unix.Stat_t
	if err := unix.Fstat(b.fd, &st); err != nil {
		b.tmp = path
		b.discard()
		return fail(fmt.Errorf("stat %s: %w", path, err))
	}
	p := &Producer{
		name:        cfg.Name,
		path:        path,
		fd:          b.fd,
		mem:         b.mem,
		r:           newRing(b.mem, g.slotCount, g.slotSize, g.dataOffset),
		fields:      cloneFields(cfg.Fields),
		tensorCount: TensorCount(cfg.Fields),
		generation:  b.generation,
		slotSize:    g.slotSize,
		slots:       g.slotCount,
		dev:         st.Dev,
		ino:         st.Ino,
		arena:       cfg.Arena,
		named:       cfg.Arena.idOrZero(),
		replaced:    replaced,
		hbStop:      make(chan struct{}),
		hbDone:      make(chan struct{}),
	}
	for i := range p.held {
		p.held[i].p = p
	}
	go p.heartbeat()
	return p, nil
}

// prepareCreate fills in cfg's defaults and checks it, returning the
// encoded schema and the ring's geometry.
func prepareCreate(cfg Config) (Config, []byte, geometry, error) {
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir()
	}
	if cfg.Slots == 0 {
		cfg.Slots = defaultSlots
	}
	if cfg.Mode == 0 {
		cfg.Mode = 0o600
	}
	if err := validRingName(cfg.Name); err != nil {
		return cfg, nil, geometry{}, err
	}
	if cfg.Mode&^os.ModePerm != 0 {
		return cfg, nil, geometry{}, fmt.Errorf("mode %v: only permission bits are allowed", cfg.Mode)
	}
	if err := validateFields(cfg.Fields); err != nil {
		return cfg, nil, geometry{}, fmt.Errorf("schema: %w", err)
	}
	schema := encodeSchema(cfg.Fields)
	g, err := computeGeometry(cfg.Slots, cfg.SlotSize, len(schema))
	if err != nil {
		return cfg, nil, geometry{}, err
	}
	tensors := TensorCount(cfg.Fields)
	if minSlot := tableEnd(tensors); minSlot > g.slotSize {
		return cfg, nil, geometry{}, fmt.Errorf("a slot of %d bytes cannot hold the tensor table of %d tensors (%d bytes): raise SlotSize", g.slotSize, tensors, minSlot)
	}
	if st, err := os.Stat(cfg.Dir); err != nil {
		return cfg, nil, geometry{}, fmt.Errorf("ring directory: %w", err)
	} else if !st.IsDir() {
		return cfg, nil, geometry{}, fmt.Errorf("ring directory %s is not a directory", cfg.Dir)
	}
	return cfg, schema, g, nil
}

// builtRing is a finished ring file under its temporary name, locked and
// mapped.
type builtRing struct {
	fd         int
	tmp        string
	mem        []byte
	generation uint64
}

// discard unmaps, closes and unlinks b.
func (b *builtRing) discard() {
	if b.mem != nil {
		unix.Munmap(b.mem)
	}
	unix.Close(b.fd)
	unix.Unlink(b.tmp)
}

// buildTemp creates the ring's temporary file, reserves and pre-faults all
// of it, and writes its header, magic last.
func buildTemp(cfg Config, schema []byte, g geometry) (*builtRing, error) {
	fd, tmp, err := createTemp(cfg.Dir, cfg.Name, cfg.Mode)
	if err != nil {
		return nil, err
	}
	b := &builtRing{fd: fd, tmp: tmp}
	fail := func(err error) (*builtRing, error) {
		b.discard()
		return nil, err
	}
	if err := unix.Fchmod(fd, uint32(cfg.Mode)); err != nil {
		return fail(fmt.Errorf("chmod %s: %w", tmp, err))
	}
	// Lock first: a temporary file whose lock is free belongs to a producer
	// that died while creating it, and removeStaleTemps may delete it.
	if err := lockByte(fd, producerLockByte); err != nil {
		return fail(fmt.Errorf("lock %s: %w", tmp, err))
	}
	if err := reserve(fd, g.fileSize); err != nil {
		return fail(spaceError(cfg.Dir, g, err))
	}
	if b.mem, err = mapFile(fd, g.fileSize, false); err != nil {
		return fail(err)
	}
	prefault(b.mem)
	if b.generation, err = randomU64(); err != nil {
		return fail(err)
	}
	pid := os.Getpid()
	major, minor := formatVersion(cfg.Fields, cfg.Arena != nil)
	writeHeader(b.mem, g, schema, major, minor, b.generation, int32(pid), processStart(pid))
	if a := cfg.Arena; a != nil {
		binary.LittleEndian.PutUint64(b.mem[offArenaID:], a.id)
		binary.LittleEndian.PutUint64(b.mem[offArenaSize:], uint64(len(a.mem)-ArenaHeaderSize))
	}
	u64At(b.mem, offMagic).Store(magicWord) // last, with a release store (§3.1)
	return b, nil
}

// spaceError explains a failed reservation to an operator.
func spaceError(dir string, g geometry, err error) error {
	free := "an unknown number of bytes"
	if f := freeBytes(dir); f >= 0 {
		free = fmt.Sprintf("%d bytes free (%s)", f, sizeString(f))
	}
	what := fmt.Sprintf("reserve %d bytes (%s: %d slots of %d bytes + %d header bytes) in %s",
		g.fileSize, sizeString(g.fileSize), g.slotCount, g.slotSize, g.dataOffset, dir)
	if errors.Is(err, unix.EFBIG) {
		return fmt.Errorf("%s: file size limit exceeded (%w): raise the limit (ulimit -f, systemd LimitFSIZE=), "+
			"or use fewer or smaller slots; %s has %s", what, err, dir, free)
	}
	return fmt.Errorf("%s: %w; %s has %s: enlarge it (Docker: --shm-size=%s or more; Kubernetes: an emptyDir with medium Memory; "+
		"host: mount -o remount,size=... %s), or use fewer or smaller slots",
		what, err, dir, free, sizeString(g.fileSize+g.fileSize/4), dir)
}

// sizeString formats n bytes for people, e.g. "1.5g" (Docker's units).
func sizeString(n int64) string {
	const (
		k  = 1 << 10
		m  = 1 << 20
		gb = 1 << 30
	)
	switch {
	case n >= gb:
		return strconv.FormatFloat(float64(n)/gb, 'f', 1, 64) + "g"
	case n >= m:
		return strconv.FormatFloat(float64(n)/m, 'f', 1, 64) + "m"
	case n >= k:
		return strconv.FormatFloat(float64(n)/k, 'f', 1, 64) + "k"
	}
	return strconv.FormatInt(n, 10)
}

// prefault maps every page of mem writable now: the first touch of a page
// costs about 15 times a later copy into it, so the ring pays it once at
// creation and never per batch.
func prefault(mem []byte) {
	if unix.Madvise(mem, unix.MADV_POPULATE_WRITE) == nil {
		return
	}
	for off := 0; off < len(mem); off += pageSize {
		mem[off] = 0 // the file is fresh: every byte is already 0
	}
}

func randomU64() (uint64, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, fmt.Errorf("random generation: %w", err)
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// writeHeader writes everything of a fresh ring but the magic.
func writeHeader(mem []byte, g geometry, schema []byte, major, minor uint16, generation uint64, pid int32, start uint64) {
	le := binary.LittleEndian
	le.PutUint16(mem[offVersionMajor:], major)
	le.PutUint16(mem[offVersionMinor:], minor)
	le.PutUint32(mem[offHeaderSize:], uint32(g.headerSize))
	le.PutUint32(mem[offSlotCount:], uint32(g.slotCount))
	le.PutUint64(mem[offSlotSize:], uint64(g.slotSize))
	le.PutUint64(mem[offDataOffset:], uint64(g.dataOffset))
	le.PutUint64(mem[offGeneration:], generation)
	le.PutUint32(mem[offSchemaOffset:], schemaOffset)
	le.PutUint32(mem[offSchemaLen:], uint32(len(schema)))
	le.PutUint64(mem[offSchemaHash:], schemaHash(schema))
	le.PutUint32(mem[offProducerPID:], uint32(pid))
	le.PutUint64(mem[offProducerStart:], start)
	le.PutUint64(mem[offCreatedUnixNano:], uint64(time.Now().UnixNano()))
	le.PutUint64(mem[offProducerHeartbeat:], monotonicNow())
	copy(mem[schemaOffset:], schema)
	for k := 0; k < g.slotCount; k++ {
		le.PutUint64(mem[g.dataOffset+int64(k)*g.slotSize+slotOffSeq:], emptySeq)
	}
}

func cloneFields(fields []Field) []Field {
	out := make([]Field, len(fields))
	for i, f := range fields {
		f.Dims = append([]int64(nil), f.Dims...)
		f.Keys = append([]string(nil), f.Keys...)
		out[i] = f
	}
	return out
}
