package shm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"time"
)

// The parsers here are pure functions over bytes, so that they can be
// fuzzed: whatever the input, they return an error instead of panicking,
// and every slice they hand back lies inside their input.

// Header is the parsed immutable part of a ring's header (§3.1) and its
// schema (§4).
type Header struct {
	VersionMajor  uint16
	VersionMinor  uint16
	HeaderSize    int64 // page 0 + padded schema block
	SlotCount     int
	SlotSize      int64
	DataOffset    int64
	Generation    uint64
	SchemaOffset  int64
	SchemaLen     int64
	SchemaHash    uint64
	ProducerPID   int32
	ProducerStart uint64 // clock ticks since boot, /proc/PID/stat field 22
	Created       time.Time
	Fields        []Field
	// ArenaID and ArenaSize name the job's unit arena (format 4.x, §8):
	// the file ArenaName(ArenaID) in the ring's directory, of ArenaSize
	// data bytes after its header page. Both are 0 for a ring without one.
	ArenaID   uint64
	ArenaSize int64
}

// ParseHeader parses and validates the header of a ring file of fileSize
// bytes whose first bytes are b (b must hold at least header_size bytes:
// page 0 and the schema block). It checks everything of §6.5 items 1-4.
func ParseHeader(b []byte, fileSize int64) (Header, error) {
	var h Header
	if len(b) < len(magic) || fileSize < int64(len(magic)) {
		return h, fmt.Errorf("%w: %d bytes, shorter than the magic", ErrTruncated, min(int64(len(b)), fileSize))
	}
	if !bytes.Equal(b[:len(magic)], magic[:]) {
		return h, fmt.Errorf("%w: magic is %q, want %q", ErrNotRing, b[:len(magic)], magic[:])
	}
	if len(b) < pageSize || fileSize < pageSize {
		return h, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header page", ErrTruncated, min(int64(len(b)), fileSize), pageSize)
	}
	le := binary.LittleEndian
	h.VersionMajor = le.Uint16(b[offVersionMajor:])
	h.VersionMinor = le.Uint16(b[offVersionMinor:])
	if h.VersionMajor < 1 || h.VersionMajor > VersionMajor {
		return h, fmt.Errorf("%w: ring format %d.%d, this lastmile reads 1.x to %d.x: upgrade lastmile (or run a producer of the same version)",
			ErrVersion, h.VersionMajor, h.VersionMinor, VersionMajor)
	}
	h.HeaderSize = int64(le.Uint32(b[offHeaderSize:]))
	slotCount := le.Uint32(b[offSlotCount:])
	slotSize := le.Uint64(b[offSlotSize:])
	dataOffset := le.Uint64(b[offDataOffset:])
	h.Generation = le.Uint64(b[offGeneration:])
	h.SchemaOffset = int64(le.Uint32(b[offSchemaOffset:]))
	h.SchemaLen = int64(le.Uint32(b[offSchemaLen:]))
	h.SchemaHash = le.Uint64(b[offSchemaHash:])
	h.ProducerPID = int32(le.Uint32(b[offProducerPID:]))
	h.ProducerStart = le.Uint64(b[offProducerStart:])
	h.Created = time.Unix(0, int64(le.Uint64(b[offCreatedUnixNano:])))

	switch {
	case slotCount < 1 || slotCount > MaxSlots:
		return h, corruptf("slot_count %d, want 1 to %d", slotCount, MaxSlots)
	case slotSize == 0 || slotSize%pageSize != 0 || slotSize > maxSlotSize:
		return h, corruptf("slot_size %d is not a positive multiple of %d (at most %d)", slotSize, pageSize, int64(maxSlotSize))
	case dataOffset%pageSize != 0 || dataOffset > maxFileSize:
		return h, corruptf("data_offset %d is not a multiple of %d", dataOffset, pageSize)
	case h.SchemaOffset < pageSize:
		return h, corruptf("schema_offset %d lies inside the header page", h.SchemaOffset)
	case h.SchemaOffset+h.SchemaLen > h.HeaderSize || uint64(h.HeaderSize) > dataOffset:
		return h, corruptf("schema_offset %d + schema_len %d <= header_size %d <= data_offset %d does not hold",
			h.SchemaOffset, h.SchemaLen, h.HeaderSize, dataOffset)
	}
	if h.VersionMajor >= 4 {
		h.ArenaID = le.Uint64(b[offArenaID:])
		size := le.Uint64(b[offArenaSize:])
		if (h.ArenaID == 0) != (size == 0) || size%pageSize != 0 || size > maxFileSize {
			return h, corruptf("arena_id %#x with arena_size %d: want both 0, or an id with a positive multiple of %d (at most %d)",
				h.ArenaID, size, pageSize, int64(maxFileSize))
		}
		h.ArenaSize = int64(size)
	}
	h.SlotCount = int(slotCount)
	h.SlotSize = int64(slotSize)
	h.DataOffset = int64(dataOffset)
	if need := h.DataOffset + int64(h.SlotCount)*h.SlotSize; need > fileSize {
		return h, fmt.Errorf("%w: file is %d bytes, the header describes %d (%d slots of %d bytes from offset %d)",
			ErrTruncated, fileSize, need, h.SlotCount, h.SlotSize, h.DataOffset)
	}
	if int64(len(b)) < h.HeaderSize {
		return h, fmt.Errorf("%w: have %d bytes of a %d-byte header", ErrTruncated, len(b), h.HeaderSize)
	}
	schema := b[h.SchemaOffset : h.SchemaOffset+h.SchemaLen]
	if got := schemaHash(schema); got != h.SchemaHash {
		return h, fmt.Errorf("%w: schema block hashes to %#x, header says %#x", ErrSchemaHash, got, h.SchemaHash)
	}
	fields, err := ParseSchema(schema)
	if err != nil {
		return h, err
	}
	h.Fields = fields
	return h, nil
}

// ParseSchema parses the used part of a schema block (§4).
func ParseSchema(b []byte) ([]Field, error) {
	if len(b) < 8 {
		return nil, corruptf("schema block of %d bytes, want at least 8", len(b))
	}
	le := binary.LittleEndian
	count := le.Uint32(b[0:])
	entry := le.Uint32(b[4:])
	if count > MaxFields {
		return nil, corruptf("field_count %d, at most %d", count, MaxFields)
	}
	if entry < schemaEntrySize || entry > pageSize {
		return nil, corruptf("schema entry_size %d, want %d", entry, schemaEntrySize)
	}
	if need := 8 + uint64(count)*uint64(entry); need > uint64(len(b)) {
		return nil, corruptf("schema of %d fields needs %d bytes, schema_len is %d", count, need, len(b))
	}
	fields := make([]Field, count)
	seen := make(map[string]int, count)
	for i := range fields {
		e := b[8+uint64(i)*uint64(entry):]
		name := e[:64]
		n := bytes.IndexByte(name, 0)
		if n < 0 || n > MaxFieldNameLen {
			return nil, corruptf("field %d: name is not NUL-terminated within %d bytes", i, MaxFieldNameLen+1)
		}
		if bytes.IndexFunc(name[n:], func(r rune) bool { return r != 0 }) >= 0 {
			return nil, corruptf("field %d: name is not NUL-padded", i)
		}
		f := &fields[i]
		f.Name = string(name[:n])
		f.Kind = Kind(e[64])
		f.DType = DType(e[65])
		ndim := int(e[66])
		flags := e[67]
		f.Nullable = flags&fieldFlagNullable != 0
		f.UTF8 = flags&fieldFlagUTF8 != 0
		f.Weighted = flags&fieldFlagWeighted != 0
		if f.Kind == Jagged {
			keys, err := parseKeys(b, i, f.Name, le.Uint32(e[68:]), le.Uint64(e[72:]), 8+uint64(count)*uint64(entry))
			if err != nil {
				return nil, err
			}
			f.Keys = keys
		}
		if ndim > MaxDims || (f.Kind != Dense && ndim != 0) {
			return nil, corruptf("field %d (%q): ndim %d is not valid for kind %v", i, f.Name, ndim, f.Kind)
		}
		if ndim > 0 {
			f.Dims = make([]int64, ndim)
		}
		for j := 0; j < MaxDims; j++ {
			d := le.Uint64(e[72+8*j:])
			if j >= ndim {
				if d != 0 && !(f.Kind == Jagged && j == 0) { // a jagged field's dims[0] is its keys' offset
					return nil, corruptf("field %d (%q): unused dimension %d is %d, want 0", i, f.Name, j, d)
				}
				continue
			}
			if d < 1 || d > maxSlotSize {
				return nil, corruptf("field %d (%q): dimension %d is %d", i, f.Name, j, d)
			}
			f.Dims[j] = int64(d)
		}
		if err := validateField(i, f); err != nil {
			return nil, corruptf("%v", err)
		}
		if j, dup := seen[f.Name]; dup {
			return nil, corruptf("fields %d and %d are both named %q", j, i, f.Name)
		}
		seen[f.Name] = i
	}
	return fields, nil
}

// parseKeys reads the key table of jagged field i (§4.1): count entries of
// 64 bytes at off within the schema block b, after the field entries
// (which end at entriesEnd).
func parseKeys(b []byte, i int, name string, count uint32, off, entriesEnd uint64) ([]string, error) {
	if count < 1 || count > MaxKeys {
		return nil, corruptf("field %d (%q): key_count %d, want 1 to %d", i, name, count, MaxKeys)
	}
	if off < entriesEnd || off > uint64(len(b)) || uint64(count)*keyEntrySize > uint64(len(b))-off {
		return nil, corruptf("field %d (%q): %d keys at offset %d do not lie after the field entries (%d) within schema_len %d",
			i, name, count, off, entriesEnd, len(b))
	}
	keys := make([]string, count)
	for j := range keys {
		e := b[off+uint64(j)*keyEntrySize : off+uint64(j+1)*keyEntrySize]
		n := bytes.IndexByte(e, 0)
		if n < 0 || bytes.IndexFunc(e[n:], func(r rune) bool { return r != 0 }) >= 0 {
			return nil, corruptf("field %d (%q): key %d is not NUL-terminated and NUL-padded within %d bytes", i, name, j, keyEntrySize)
		}
		keys[j] = string(e[:n])
	}
	return keys, nil
}

// Cursor says where a batch stands in the job (§5.1): what a trainer
// checkpoints to resume exactly.
type Cursor struct {
	Epoch      uint64
	BatchIndex uint64 // index of the batch within the epoch for this rank
	Rank       uint32
	Flags      uint32 // FlagLastInEpoch, FlagPadded
}

// Batch flags (slot header batch_flags).
const (
	FlagLastInEpoch = 1 << 0
	// FlagPadded marks a batch whose last PadRows rows are padding
	// (copies of earlier rows of the epoch, batch.last: pad).
	FlagPadded = 1 << 1
)

// SlotHeader is the parsed slot header (§5.1).
type SlotHeader struct {
	Seq       uint64
	UsedBytes int64
	Rows      int
	// PadRows is pad_rows (format x.1): the batch's last PadRows rows are
	// padding. A producer of format x.0 leaves it 0 even in a padded batch;
	// Batch.RealRows tells the two apart with the ring's version.
	PadRows int
	Cursor  Cursor
}

// Tensor is one entry of a batch's tensor table with its payload.
type Tensor struct {
	Field  int // index into the schema
	Name   string
	Role   Role
	DType  DType
	Shape  []int64
	Offset int64  // payload offset from the start of the slot, or of the arena file
	Data   []byte // the payload: a view into the slot or the arena, never a copy
	// InArena says the payload lies in the job's unit arena (format 4.x,
	// §8), Offset from the start of the arena file.
	InArena bool

	shape [maxTensorDims]int64
}

// ParseSlot parses and validates one slot of a ring with the given schema
// (§5 and §6.5 item 5): the tensor table must follow the schema, every
// payload must lie within used_bytes, and ragged offsets must be well
// formed, so a caller can index values with them without bounds surprises.
// It appends the tensors to dst[:0] and returns it; Data views alias slot.
// It does not check seq: that is the caller's (§6.2). It checks the slot
// as format x.1 (VersionMinor) requires; a consumer checks a slot of an
// older minor version by its own rules.
func ParseSlot(slot []byte, fields []Field, dst []Tensor) (SlotHeader, []Tensor, error) {
	return parseSlot(slot, fields, dst, VersionMinor, nil)
}

// ParseSlotArena is ParseSlot for a ring of major 4 whose arena file,
// mapped whole (header page included), is arena: a tensor entry of place
// 1 must lie in its data, and its Data is a view into arena.
func ParseSlotArena(slot []byte, fields []Field, dst []Tensor, arena []byte) (SlotHeader, []Tensor, error) {
	return parseSlot(slot, fields, dst, VersionMinor, arena)
}

// parseSlot is ParseSlot for a ring of the given minor version. From x.1
// on, pad_rows is set exactly when batch_flags bit 1 is, and null rows of
// ragged fields are empty; an x.0 producer promised neither.
func parseSlot(slot []byte, fields []Field, dst []Tensor, minor uint16, arena []byte) (SlotHeader, []Tensor, error) {
	dst = dst[:0]
	sh, count, tableBytes, err := parseSlotHeader(slot, fields, minor)
	if err != nil {
		return sh, dst, err
	}
	le := binary.LittleEndian
	it := planIter{fields: fields}
	var rc raggedCheck
	for k := 0; k < int(count); k++ {
		e := slot[slotHeaderSize+k*tensorEntrySize:]
		wantField, wantRole, _ := it.next()
		f := &fields[wantField]
		field := int(le.Uint16(e[tensorOffField:]))
		role := Role(e[tensorOffRole])
		if field != wantField || role != wantRole {
			return sh, dst, corruptf("slot %d: tensor %d is field %d role %v, want field %d (%q) role %v",
				sh.Seq, k, field, role, wantField, f.Name, wantRole)
		}
		// Built in place in dst: a local Tensor would escape to the heap
		// through the error paths' formatting of its shape.
		dst = append(dst, Tensor{Field: field, Name: f.Name, Role: role, DType: DType(e[tensorOffDType])})
		t := &dst[len(dst)-1]
		if err := parseTensor(slot, e, &sh, f, t, tableBytes, arena); err != nil {
			return sh, dst, err
		}
		if err := rc.check(t, f, sh.Seq, minor); err != nil {
			return sh, dst, err
		}
	}
	for i := range dst {
		t := &dst[i]
		n := 1
		if t.Role == RoleDense {
			n = 1 + len(fields[t.Field].Dims)
		}
		t.Shape = t.shape[:n]
	}
	return sh, dst, nil
}

// parseSlotHeader parses and checks the fixed slot header: used_bytes,
// pad_rows against batch_flags, tensor_count against the schema, and that
// the tensor table fits within used_bytes. It returns the tensor count and
// where the table ends. On error, sh holds only Seq and Cursor (as far as
// they were read), as callers of parseSlot have always seen.
func parseSlotHeader(slot []byte, fields []Field, minor uint16) (sh SlotHeader, count uint32, tableBytes uint64, err error) {
	if len(slot) < slotHeaderSize {
		return sh, 0, 0, fmt.Errorf("%w: slot of %d bytes, shorter than its header", ErrTruncated, len(slot))
	}
	le := binary.LittleEndian
	sh.Seq = le.Uint64(slot[slotOffSeq:])
	used := le.Uint64(slot[slotOffUsed:])
	rows := le.Uint32(slot[slotOffRows:])
	count = le.Uint32(slot[slotOffTensors:])
	sh.Cursor = Cursor{
		Epoch:      le.Uint64(slot[slotOffEpoch:]),
		BatchIndex: le.Uint64(slot[slotOffBatchIndex:]),
		Rank:       le.Uint32(slot[slotOffRank:]),
		Flags:      le.Uint32(slot[slotOffFlags:]),
	}
	pad := le.Uint32(slot[slotOffPadRows:])
	if used > uint64(len(slot)) {
		return sh, 0, 0, corruptf("slot %d: used_bytes %d exceeds the slot size %d", sh.Seq, used, len(slot))
	}
	padded := sh.Cursor.Flags&FlagPadded != 0
	if pad > rows || (pad > 0 && !padded) || (minor >= 1 && padded && pad == 0) {
		return sh, 0, 0, corruptf("slot %d: pad_rows %d in a batch of %d rows with batch_flags %#x (want 1 to rows with bit 1 set, else 0)",
			sh.Seq, pad, rows, sh.Cursor.Flags)
	}
	if want := TensorCount(fields); int64(count) != int64(want) {
		return sh, 0, 0, corruptf("slot %d: tensor_count %d, the schema needs %d", sh.Seq, count, want)
	}
	tableBytes = uint64(slotHeaderSize) + uint64(count)*tensorEntrySize
	if tableBytes > used {
		return sh, 0, 0, corruptf("slot %d: tensor table of %d entries ends at %d, past used_bytes %d", sh.Seq, count, tableBytes, used)
	}
	sh.UsedBytes = int64(used)
	sh.Rows = int(rows)
	sh.PadRows = int(pad)
	return sh, count, tableBytes, nil
}

// parseTensor checks tensor table entry e, whose field, role and dtype t
// already holds, against field f and the slot header sh: dtype, shape,
// leading dimension, nbytes, and a payload offset that is aligned, after
// the table (which ends at tableBytes) and within used_bytes, or, for
// place 1, inside the arena's data (§8.2). It fills in t's shape, Offset
// and Data (a view into slot or arena).
func parseTensor(slot, e []byte, sh *SlotHeader, f *Field, t *Tensor, tableBytes uint64, arena []byte) error {
	le := binary.LittleEndian
	role := t.Role
	used := uint64(sh.UsedBytes)
	if want := roleDType(f, role); t.DType != want {
		return corruptf("slot %d: %q %v tensor has dtype %v, want %v", sh.Seq, f.Name, role, t.DType, want)
	}
	ndim, elems, err := tensorShape(e, sh.Seq, f, t)
	if err != nil {
		return err
	}
	if err := checkLead(sh, f, t, ndim); err != nil {
		return err
	}
	hi, nbytes := bits.Mul64(elems, uint64(t.DType.Size()))
	if hi != 0 || nbytes != le.Uint64(e[tensorOffNBytes:]) {
		return corruptf("slot %d: %q %v tensor: nbytes %d, shape %v of %v needs %d",
			sh.Seq, f.Name, role, le.Uint64(e[tensorOffNBytes:]), t.shape[:ndim], t.DType, nbytes)
	}
	off := le.Uint64(e[tensorOffOffset:])
	if e[6] != 0 || e[7] != 0 {
		return corruptf("slot %d: %q %v tensor: reserved bytes 6-7 are %d %d, want 0", sh.Seq, f.Name, role, e[6], e[7])
	}
	switch e[tensorOffPlace] {
	case placeSlot:
	case placeArena:
		return arenaTensor(e, sh, f, t, off, nbytes, arena)
	default:
		return corruptf("slot %d: %q %v tensor: place %d, want 0 (the slot) or 1 (the arena)", sh.Seq, f.Name, role, e[tensorOffPlace])
	}
	if off%PayloadAlign != 0 || off < tableBytes || off > used || nbytes > used-off {
		return corruptf("slot %d: %q %v tensor at offset %d, %d bytes: not %d-aligned after the table (%d) and within used_bytes %d",
			sh.Seq, f.Name, role, off, nbytes, PayloadAlign, tableBytes, used)
	}
	t.Offset = int64(off)
	t.Data = slot[off : off+nbytes : off+nbytes]
	return nil
}

// arenaTensor checks a place-1 entry (§8.2): a ring with an arena, a
// role whose payload may lie there (dense, values, weights), an offset
// aligned to the dtype inside the arena's data. It points t's Data there.
func arenaTensor(e []byte, sh *SlotHeader, f *Field, t *Tensor, off, nbytes uint64, arena []byte) error {
	if len(arena) == 0 {
		return corruptf("slot %d: %q %v tensor lies in an arena, and the ring has none", sh.Seq, f.Name, t.Role)
	}
	if t.Role != RoleDense && t.Role != RoleValues && t.Role != RoleWeights {
		return corruptf("slot %d: %q %v tensor lies in the arena; only dense, values and weights tensors may", sh.Seq, f.Name, t.Role)
	}
	n := uint64(len(arena))
	if off%uint64(t.DType.Size()) != 0 || off < ArenaHeaderSize || off > n || nbytes > n-off {
		return corruptf("slot %d: %q %v tensor at arena offset %d, %d bytes: not %d-aligned within the arena's data (%d to %d)",
			sh.Seq, f.Name, t.Role, off, nbytes, t.DType.Size(), ArenaHeaderSize, n)
	}
	t.Offset = int64(off)
	t.Data = arena[off : off+nbytes : off+nbytes]
	t.InArena = true
	return nil
}

// tensorShape reads the dimensions of tensor table entry e into t.shape,
// checking their count against what t's role needs, that unused ones are
// zero and that none is absurd. It returns the number of dimensions and
// of elements, refusing a shape whose element count overflows.
func tensorShape(e []byte, seq uint64, f *Field, t *Tensor) (ndim int, elems uint64, err error) {
	le := binary.LittleEndian
	role := t.Role
	ndim = int(e[tensorOffNDim])
	wantNDim := 1
	if role == RoleDense {
		wantNDim = 1 + len(f.Dims)
	}
	if ndim != wantNDim {
		return 0, 0, corruptf("slot %d: %q %v tensor has %d dimensions, want %d", seq, f.Name, role, ndim, wantNDim)
	}
	elems = uint64(1)
	for j := 0; j < maxTensorDims; j++ {
		d := le.Uint64(e[tensorOffShape+8*j:])
		if j >= ndim {
			if d != 0 && !(f.Kind == Jagged && j == 0) { // a jagged field's dims[0] is its keys' offset
				return 0, 0, corruptf("slot %d: %q %v tensor: unused dimension %d is %d", seq, f.Name, role, j, d)
			}
			continue
		}
		if d > maxSlotSize {
			return 0, 0, corruptf("slot %d: %q %v tensor: dimension %d is %d", seq, f.Name, role, j, d)
		}
		t.shape[j] = int64(d)
		hi, lo := bits.Mul64(elems, d)
		if hi != 0 {
			return 0, 0, corruptf("slot %d: %q %v tensor: shape overflows", seq, f.Name, role)
		}
		elems = lo
	}
	return ndim, elems, nil
}

// checkLead checks t's leading dimension against the batch's row count
// as its role requires (and a dense tensor's trailing dimensions against
// the schema), so that callers can index rows without further checks.
func checkLead(sh *SlotHeader, f *Field, t *Tensor, ndim int) error {
	rows := uint32(sh.Rows)
	var wantLead int64
	switch t.Role {
	case RoleDense:
		wantLead = int64(rows)
		for j, d := range f.Dims {
			if t.shape[1+j] != d {
				return corruptf("slot %d: %q shape %v, want trailing dimensions %v", sh.Seq, f.Name, t.shape[:ndim], f.Dims)
			}
		}
	case RoleValues, RoleWeights:
		wantLead = t.shape[0] // checked against the values by raggedCheck
	case RoleOffsets:
		wantLead = int64(rows)*f.rowsPer() + 1
	case RoleLengths:
		wantLead = int64(rows) * f.rowsPer()
	case RoleValidity:
		wantLead = int64(rows)
	}
	if t.shape[0] != wantLead {
		return corruptf("slot %d: %q %v tensor has %d rows, want %d (batch of %d rows)", sh.Seq, f.Name, t.Role, t.shape[0], wantLead, rows)
	}
	return nil
}

// raggedCheck carries what the payload checks of one field's later
// tensors need from its earlier ones, in table order: offsets are checked
// against the values before them, lengths and null rows against the
// offsets before them.
type raggedCheck struct {
	values  int64  // shape[0] of the last values tensor
	offsets []byte // payload of the last offsets tensor
}

// check checks the payload of t, a tensor of field f, as its role needs
// and remembers what later tensors are checked against.
func (rc *raggedCheck) check(t *Tensor, f *Field, seq uint64, minor uint16) error {
	switch t.Role {
	case RoleValues:
		rc.values = t.shape[0]
	case RoleOffsets:
		if err := checkOffsets(t.Data, rc.values); err != nil {
			return corruptf("slot %d: %q offsets: %v", seq, f.Name, err)
		}
		rc.offsets = t.Data
	case RoleLengths:
		if err := checkLengths(t.Data, rc.offsets); err != nil {
			return corruptf("slot %d: %q lengths: %v", seq, f.Name, err)
		}
	case RoleWeights:
		if t.shape[0] != rc.values {
			return corruptf("slot %d: %q weights: %d, for %d values", seq, f.Name, t.shape[0], rc.values)
		}
	case RoleValidity:
		if f.Kind == Ragged && minor >= 1 {
			if err := checkNullRows(t.Data, rc.offsets); err != nil {
				return corruptf("slot %d: %q: %v", seq, f.Name, err)
			}
		}
	}
	return nil
}

// checkLengths checks a jagged lengths payload against its offsets (one
// entry more): lengths[i] == offsets[i+1] - offsets[i].
func checkLengths(b, offsets []byte) error {
	le := binary.LittleEndian
	if len(offsets) != len(b)+8 {
		return fmt.Errorf("%d entries for %d offsets", len(b)/8, len(offsets)/8)
	}
	for i := 0; i+8 <= len(b); i += 8 {
		if d := int64(le.Uint64(offsets[i+8:])) - int64(le.Uint64(offsets[i:])); int64(le.Uint64(b[i:])) != d {
			return fmt.Errorf("entry %d is %d, the offsets say %d", i/8, int64(le.Uint64(b[i:])), d)
		}
	}
	return nil
}

// checkNullRows checks what §5.2 promises of a nullable ragged field
// (format x.1): every null row is empty, offsets[i+1] == offsets[i] where
// valid[i] == 0.
func checkNullRows(valid, offsets []byte) error {
	le := binary.LittleEndian
	if len(offsets) != 8*(len(valid)+1) {
		return fmt.Errorf("%d validity entries for %d offsets", len(valid), len(offsets)/8)
	}
	for i, v := range valid {
		if v == 0 && le.Uint64(offsets[8*i:]) != le.Uint64(offsets[8*i+8:]) {
			return fmt.Errorf("row %d is null but holds %d values (a null row of a ragged field is empty)",
				i, int64(le.Uint64(offsets[8*i+8:])-le.Uint64(offsets[8*i:])))
		}
	}
	return nil
}

// checkOffsets checks a ragged offsets payload: offsets[0] == 0,
// non-decreasing, and the last equal to the number of values.
func checkOffsets(b []byte, values int64) error {
	le := binary.LittleEndian
	prev := int64(0)
	for i := 0; i+8 <= len(b); i += 8 {
		o := int64(le.Uint64(b[i:]))
		if (i == 0 && o != 0) || o < prev {
			return fmt.Errorf("entry %d is %d after %d", i/8, o, prev)
		}
		prev = o
	}
	if prev != values {
		return fmt.Errorf("last offset is %d, values tensor holds %d", prev, values)
	}
	return nil
}
