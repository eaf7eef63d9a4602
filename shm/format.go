package shm

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strings"
	"unicode/utf8"
)

// Constants of ring format 3.2 (docs/ring-format.md; 2.2 is 3.2 without
// weighted jagged fields, 1.2 is 2.2 without jagged fields). Offsets are in bytes from the start of the file (header),
// the slot (slot header, tensor table) or the schema entry.
const (
	// VersionMajor and VersionMinor are the newest format version this
	// package writes. It reads any minor version of majors 1 to 3, and
	// writes the lowest major a schema needs (formatVersion): 3 for a
	// weighted jagged field, 2 for a jagged field, else 1, so that older
	// readers keep reading every ring they can. A minor version adds the
	// same fields to every major (§7): this package writes 1.2, 2.2 or 3.2
	// (x.2 adds the announcement, announce.go).
	VersionMajor = 4
	VersionMinor = 2

	// MaxSlots is the largest slot count (§3.1).
	MaxSlots = 65536
	// MaxFields is the largest schema field count (§4).
	MaxFields = 4096
	// MaxRingNameLen is the longest ring name in bytes (§1).
	MaxRingNameLen = 200
	// MaxFieldNameLen is the longest field name in bytes (§4).
	MaxFieldNameLen = 63
	// MaxDims is the largest number of trailing dimensions of a dense field.
	MaxDims = 3
	// MaxKeys is the largest number of keys of a jagged field (§4.1).
	MaxKeys = 4096
	// MaxMessageLen is the longest status message in bytes (§3.5).
	MaxMessageLen = 1020
	// PayloadAlign is the alignment of every payload within a slot (§5.3).
	PayloadAlign = 256

	pageSize        = 4096
	hugePageSize    = 2 << 20
	schemaOffset    = pageSize
	schemaEntrySize = 96
	keyEntrySize    = 64
	slotHeaderSize  = 64
	tensorEntrySize = 64
	maxTensorDims   = 4
	emptySeq        = ^uint64(0)

	// Upper bounds that keep every size computation far from overflow.
	maxSlotSize = 1 << 40
	maxFileSize = 1 << 46
)

var magic = [8]byte{'L', 'M', 'R', 'I', 'N', 'G', 0, 1}

// magicWord is the magic as the little-endian u64 that is stored atomically.
var magicWord = binary.LittleEndian.Uint64(magic[:])

// Header (page 0) offsets, §3.
const (
	offMagic             = 0
	offVersionMajor      = 8
	offVersionMinor      = 10
	offHeaderSize        = 12
	offSlotCount         = 16
	offFlags             = 20
	offSlotSize          = 24
	offDataOffset        = 32
	offGeneration        = 40
	offSchemaOffset      = 48
	offSchemaLen         = 52
	offSchemaHash        = 56
	offProducerPID       = 64
	offProducerStart     = 72
	offCreatedUnixNano   = 80
	offTail              = 128
	offDataFutex         = 136
	offProducerWaiting   = 140
	offProducerHeartbeat = 144
	offState             = 152
	offEndedUnixNano     = 160 // format x.1
	offHead              = 256
	offSpaceFutex        = 264
	offConsumerWaiting   = 268
	offConsumerHeartbeat = 272
	offConsumerPID       = 280
	offMessageLen        = 512
	offMessage           = 516
)

// Slot header offsets (§5.1) and tensor entry offsets (§5.2).
const (
	slotOffSeq        = 0
	slotOffUsed       = 8
	slotOffRows       = 16
	slotOffTensors    = 20
	slotOffEpoch      = 24
	slotOffBatchIndex = 32
	slotOffRank       = 40
	slotOffFlags      = 44
	slotOffPadRows    = 48 // format x.1

	tensorOffField  = 0
	tensorOffRole   = 2
	tensorOffDType  = 3
	tensorOffNDim   = 4
	tensorOffShape  = 8
	tensorOffOffset = 40
	tensorOffNBytes = 48
)

// State is the producer's stream state (§3.2).
type State uint32

// Stream states.
const (
	StateRunning State = 0
	StateEnded   State = 1
	StateFailed  State = 2
)

func (s State) String() string {
	switch s {
	case StateRunning:
		return "running"
	case StateEnded:
		return "ended"
	case StateFailed:
		return "failed"
	}
	return fmt.Sprintf("state(%d)", uint32(s))
}

// DType is an element type; the codes are the format's (§4) and match
// package column's, which this package must not import.
type DType uint8

// Element types.
const (
	Bool     DType = 1
	Uint8    DType = 2
	Int8     DType = 3
	Int16    DType = 4
	Int32    DType = 5
	Int64    DType = 6
	Float16  DType = 7
	BFloat16 DType = 8
	Float32  DType = 9
	Float64  DType = 10
)

var dtypeNames = [...]string{"invalid", "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"}
var dtypeSizes = [...]int64{0, 1, 1, 1, 2, 4, 8, 2, 2, 4, 8}

// Size returns the width of one element in bytes, 0 for an unknown code.
func (d DType) Size() int64 {
	if int(d) >= len(dtypeSizes) {
		return 0
	}
	return dtypeSizes[d]
}

// Valid reports whether d is a known dtype code.
func (d DType) Valid() bool { return d >= Bool && d <= Float64 }

func (d DType) String() string {
	if d.Valid() {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Kind says how a field lays out its rows (§4).
type Kind uint8

// Field kinds.
const (
	Dense  Kind = 0 // one [B, dims...] tensor
	Ragged Kind = 1 // values [V] plus int64 offsets [B+1]
	// Jagged (format 2.0) is a keyed jagged group of K keys: values [V]
	// key-major, int64 offsets [K*B+1] and int64 lengths [K*B], torchrec's
	// KeyedJaggedTensor layout.
	Jagged Kind = 2
)

func (k Kind) String() string {
	switch k {
	case Dense:
		return "dense"
	case Ragged:
		return "ragged"
	case Jagged:
		return "jagged"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Role says what a tensor of a batch holds for its field (§5.2).
type Role uint8

// Tensor roles.
const (
	RoleDense    Role = 0
	RoleValues   Role = 1
	RoleOffsets  Role = 2
	RoleValidity Role = 3
	RoleLengths  Role = 4 // jagged: int64 [K*B], lengths[k*B+i] = offsets[k*B+i+1] - offsets[k*B+i]
	RoleWeights  Role = 5 // weighted jagged (format 3.0): float32 [V], a weight per id of values
)

// variable reports whether tensors of role r have a size of their own in
// every batch (values and weights: [V]), rather than one that follows
// from the row count.
func variable(r Role) bool { return r == RoleValues || r == RoleWeights }

func (r Role) String() string {
	switch r {
	case RoleDense:
		return "dense"
	case RoleValues:
		return "values"
	case RoleOffsets:
		return "offsets"
	case RoleValidity:
		return "validity"
	case RoleLengths:
		return "lengths"
	case RoleWeights:
		return "weights"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// Field is one column of the ring's schema.
type Field struct {
	Name     string
	Kind     Kind
	DType    DType    // element type (values' type for a ragged field)
	Dims     []int64  // dense only: trailing dimensions after the batch dimension, at most MaxDims, each >= 1
	Nullable bool     // a uint8 validity tensor of shape [B] follows the field's tensors
	UTF8     bool     // ragged uint8 holding UTF-8 text
	Keys     []string // jagged only: the keys, in the order of the values (1 to MaxKeys)
	// Weighted (jagged only, format 3.0): a float32 weights tensor [V]
	// follows the lengths, a weight for every id of the values: torchrec's
	// weighted KeyedJaggedTensor.
	Weighted bool
}

// rowsPer is how many jagged rows the field has per batch row: K for a
// jagged field, 1 otherwise.
func (f *Field) rowsPer() int64 {
	if f.Kind == Jagged {
		return int64(len(f.Keys))
	}
	return 1
}

// formatVersion is the version a ring with this schema is written as:
// major 3 when it has a weighted jagged field, which a 2.x reader would
// not know, else 2 when it has a jagged field, which a 1.x reader would
// not know, else 1. The minor version is the same for every major (§7).
func formatVersion(fields []Field, arena bool) (major, minor uint16) {
	if arena {
		return 4, VersionMinor
	}
	major = 1
	for i := range fields {
		switch {
		case fields[i].Kind == Jagged && fields[i].Weighted:
			major = 3
		case fields[i].Kind == Jagged:
			major = max(major, 2)
		}
	}
	return major, VersionMinor
}

const (
	fieldFlagNullable = 1 << 0
	fieldFlagUTF8     = 1 << 1
	fieldFlagWeighted = 1 << 2 // jagged only (format 3.0)
)

// tensorsOf returns how many tensors field f contributes to every batch.
func tensorsOf(f *Field) int {
	n := 1
	switch f.Kind {
	case Ragged:
		n = 2
	case Jagged:
		n = 3
		if f.Weighted {
			n++
		}
	}
	if f.Nullable {
		n++
	}
	return n
}

// TensorCount returns the number of tensors in every batch of a ring with
// this schema (§5.2).
func TensorCount(fields []Field) int {
	n := 0
	for i := range fields {
		n += tensorsOf(&fields[i])
	}
	return n
}

// planIter walks the (field, role) sequence every batch's tensor table must
// follow: schema order, dense, values+offsets or values+offsets+lengths
// (+weights if weighted), then validity if nullable.
type planIter struct {
	fields []Field
	f      int
	step   int
}

func (it *planIter) next() (field int, role Role, ok bool) {
	for it.f < len(it.fields) {
		fd := &it.fields[it.f]
		n := 0
		var roles [5]Role
		switch fd.Kind {
		case Ragged:
			roles[0], roles[1], n = RoleValues, RoleOffsets, 2
		case Jagged:
			roles[0], roles[1], roles[2], n = RoleValues, RoleOffsets, RoleLengths, 3
			if fd.Weighted {
				roles[3], n = RoleWeights, 4
			}
		default:
			roles[0], n = RoleDense, 1
		}
		if fd.Nullable {
			roles[n] = RoleValidity
			n++
		}
		if it.step < n {
			r := roles[it.step]
			it.step++
			return it.f, r, true
		}
		it.f++
		it.step = 0
	}
	return 0, 0, false
}

// roleDType is the dtype a tensor of the given role of f must have.
func roleDType(f *Field, r Role) DType {
	switch r {
	case RoleOffsets, RoleLengths:
		return Int64
	case RoleValidity:
		return Uint8
	case RoleWeights:
		return Float32
	}
	return f.DType
}

// tableEnd is where the first payload may start: after the slot header and
// a table of t entries, aligned to PayloadAlign.
func tableEnd(t int) int64 {
	return alignUp(slotHeaderSize+int64(t)*tensorEntrySize, PayloadAlign)
}

// SlotBytes returns the bytes of a slot a batch needs whose tensor table has
// tensorCount entries and whose payloads, in table order, have the given
// sizes. Compare it with the ring's slot size before writing anything.
func SlotBytes(tensorCount int, payloadBytes []int64) int64 {
	end := tableEnd(tensorCount)
	used := slotHeaderSize + int64(tensorCount)*tensorEntrySize
	for _, n := range payloadBytes {
		used = end + n
		end = alignUp(used, PayloadAlign)
	}
	return used
}

// RoundSlotSize returns the slot size a ring created with SlotSize n really
// gets: n rounded up to 4096, or to a multiple of 2 MiB when it is at least
// 2 MiB (huge-page and DMA friendly).
func RoundSlotSize(n int64) int64 {
	if n <= 0 {
		return pageSize
	}
	if n >= hugePageSize {
		return alignUp(n, hugePageSize)
	}
	return alignUp(n, pageSize)
}

func alignUp(n, a int64) int64 { return (n + a - 1) &^ (a - 1) }

// validRingName checks a ring name against §1.
func validRingName(name string) error {
	if len(name) == 0 || len(name) > MaxRingNameLen {
		return fmt.Errorf("ring name %q must be 1 to %d bytes long", name, MaxRingNameLen)
	}
	if name[0] == '.' {
		return fmt.Errorf("ring name %q must not start with '.'", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("ring name %q: byte %d (%q) is not one of [A-Za-z0-9._-]", name, i, c)
		}
	}
	return nil
}

// validateField checks one schema field; the producer and the schema parser
// share it so they agree on what a valid schema is.
func validateField(i int, f *Field) error {
	if len(f.Name) == 0 || len(f.Name) > MaxFieldNameLen {
		return fmt.Errorf("field %d: name %q must be 1 to %d bytes", i, f.Name, MaxFieldNameLen)
	}
	if !utf8.ValidString(f.Name) {
		return fmt.Errorf("field %d: name %q is not valid UTF-8", i, f.Name)
	}
	for j := 0; j < len(f.Name); j++ {
		if f.Name[j] == 0 {
			return fmt.Errorf("field %d: name %q contains a NUL byte", i, f.Name)
		}
	}
	if !f.DType.Valid() {
		return fmt.Errorf("field %q: unknown dtype code %d (want 1 to 10)", f.Name, uint8(f.DType))
	}
	switch f.Kind {
	case Dense:
		if len(f.Dims) > MaxDims {
			return fmt.Errorf("field %q: %d trailing dimensions, at most %d", f.Name, len(f.Dims), MaxDims)
		}
		for j, d := range f.Dims {
			if d < 1 || d > maxSlotSize {
				return fmt.Errorf("field %q: trailing dimension %d is %d, want 1 to %d", f.Name, j, d, int64(maxSlotSize))
			}
		}
		if f.UTF8 {
			return fmt.Errorf("field %q: the UTF-8 flag needs a ragged uint8 field", f.Name)
		}
	case Ragged:
		if len(f.Dims) != 0 {
			return fmt.Errorf("field %q: a ragged field has no trailing dimensions (got %v)", f.Name, f.Dims)
		}
		if f.UTF8 && f.DType != Uint8 {
			return fmt.Errorf("field %q: the UTF-8 flag needs dtype uint8, not %v", f.Name, f.DType)
		}
	case Jagged:
		return validateJagged(f)
	default:
		return fmt.Errorf("field %q: unknown kind %d (want 0 dense, 1 ragged or 2 jagged)", f.Name, uint8(f.Kind))
	}
	if len(f.Keys) != 0 {
		return fmt.Errorf("field %q: only a jagged field has keys", f.Name)
	}
	if f.Weighted {
		return fmt.Errorf("field %q: only a jagged field has weights", f.Name)
	}
	return nil
}

// validateJagged checks what §4.1 requires of a jagged field.
func validateJagged(f *Field) error {
	if len(f.Dims) != 0 || f.Nullable || f.UTF8 {
		return fmt.Errorf("field %q: a jagged field has no trailing dimensions and no flags (it may only be weighted)", f.Name)
	}
	if len(f.Keys) < 1 || len(f.Keys) > MaxKeys {
		return fmt.Errorf("field %q: %d keys, want 1 to %d", f.Name, len(f.Keys), MaxKeys)
	}
	seen := make(map[string]int, len(f.Keys))
	for j, k := range f.Keys {
		if len(k) == 0 || len(k) > MaxFieldNameLen || !utf8.ValidString(k) || strings.IndexByte(k, 0) >= 0 {
			return fmt.Errorf("field %q: key %d (%q) must be 1 to %d bytes of UTF-8 without NUL", f.Name, j, k, MaxFieldNameLen)
		}
		if i, dup := seen[k]; dup {
			return fmt.Errorf("field %q: keys %d and %d are both %q", f.Name, i, j, k)
		}
		seen[k] = j
	}
	return nil
}

func validateFields(fields []Field) error {
	if len(fields) > MaxFields {
		return fmt.Errorf("%d fields, at most %d", len(fields), MaxFields)
	}
	seen := make(map[string]int, len(fields))
	for i := range fields {
		if err := validateField(i, &fields[i]); err != nil {
			return err
		}
		if j, dup := seen[fields[i].Name]; dup {
			return fmt.Errorf("fields %d and %d are both named %q", j, i, fields[i].Name)
		}
		seen[fields[i].Name] = i
	}
	return nil
}

// encodeSchema returns the used part of the schema block (§4): the head,
// the field entries, then the key table of every jagged field in field
// order (§4.1).
func encodeSchema(fields []Field) []byte {
	n := 8 + schemaEntrySize*len(fields)
	keysAt := n
	for i := range fields {
		n += keyEntrySize * len(fields[i].Keys)
	}
	b := make([]byte, n)
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(len(fields)))
	le.PutUint32(b[4:], schemaEntrySize)
	for i := range fields {
		f := &fields[i]
		e := b[8+i*schemaEntrySize:]
		copy(e[:64], f.Name)
		e[64] = byte(f.Kind)
		e[65] = byte(f.DType)
		if f.Kind == Dense {
			e[66] = byte(len(f.Dims))
		}
		var flags byte
		if f.Nullable {
			flags |= fieldFlagNullable
		}
		if f.UTF8 {
			flags |= fieldFlagUTF8
		}
		if f.Weighted {
			flags |= fieldFlagWeighted
		}
		e[67] = flags
		for j, d := range f.Dims {
			le.PutUint64(e[72+8*j:], uint64(d))
		}
		if f.Kind == Jagged {
			le.PutUint32(e[68:], uint32(len(f.Keys)))
			le.PutUint64(e[72:], uint64(keysAt))
			for _, k := range f.Keys {
				copy(b[keysAt:keysAt+keyEntrySize], k)
				keysAt += keyEntrySize
			}
		}
	}
	return b
}

func schemaHash(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// geometry is the layout of a ring file (§2).
type geometry struct {
	slotCount  int
	slotSize   int64
	headerSize int64 // page 0 + schema block, padded to 4096
	dataOffset int64
	fileSize   int64
}

func computeGeometry(slots int, slotSize int64, schemaLen int) (geometry, error) {
	if slots < 1 || slots > MaxSlots {
		return geometry{}, fmt.Errorf("slot count %d: want 1 to %d", slots, MaxSlots)
	}
	if slotSize < 0 || slotSize > maxSlotSize {
		return geometry{}, fmt.Errorf("slot size %d: want at most %d bytes", slotSize, int64(maxSlotSize))
	}
	g := geometry{slotCount: slots, slotSize: RoundSlotSize(slotSize)}
	g.headerSize = schemaOffset + alignUp(int64(schemaLen), pageSize)
	g.dataOffset = g.headerSize
	if g.slotSize%hugePageSize == 0 {
		g.dataOffset = alignUp(g.dataOffset, hugePageSize)
	}
	g.fileSize = g.dataOffset + int64(slots)*g.slotSize
	if g.fileSize > maxFileSize {
		return geometry{}, fmt.Errorf("%d slots of %d bytes make a %d-byte file, more than the %d allowed", slots, g.slotSize, g.fileSize, int64(maxFileSize))
	}
	return g, nil
}
