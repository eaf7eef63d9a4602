package shm_test

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/lastmile/lastmile/shm"
)

// jaggedFields has a jagged field between a dense and a ragged one, so
// that the roles around it are checked too.
var jaggedFields = []shm.Field{
	{Name: "dense", Kind: shm.Dense, DType: shm.Float32, Dims: []int64{3}},
	{Name: "sparse", Kind: shm.Jagged, DType: shm.Int64, Keys: []string{"cat_0", "seq_0"}},
	{Name: "ids", Kind: shm.Ragged, DType: shm.Int64},
}

func i64bytes(v []int64) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 8*len(v))
}

// writeJagged publishes one batch of rows rows whose jagged field has the
// given key-major lengths (K*rows of them).
func writeJagged(ctx context.Context, p *shm.Producer, rows int, lengths []int64) error {
	s, err := p.Acquire(ctx)
	if err != nil {
		return err
	}
	if err := s.SetRows(rows); err != nil {
		return err
	}
	if err := s.AddTensor(0, shm.RoleDense, shm.Float32, make([]byte, rows*12), int64(rows), 3); err != nil {
		return err
	}
	offs := []int64{0}
	var vals []int64
	for _, l := range lengths {
		for j := int64(0); j < l; j++ {
			vals = append(vals, int64(len(vals))*7)
		}
		offs = append(offs, int64(len(vals)))
	}
	for _, t := range []struct {
		role  shm.Role
		data  []int64
		shape int64
	}{{shm.RoleValues, vals, int64(len(vals))}, {shm.RoleOffsets, offs, int64(len(offs))}, {shm.RoleLengths, lengths, int64(len(lengths))}} {
		if err := s.AddTensor(1, t.role, shm.Int64, i64bytes(t.data), t.shape); err != nil {
			return err
		}
	}
	if err := s.AddTensor(2, shm.RoleValues, shm.Int64, nil, 0); err != nil {
		return err
	}
	if err := s.AddTensor(2, shm.RoleOffsets, shm.Int64, make([]byte, 8*(rows+1)), int64(rows+1)); err != nil {
		return err
	}
	return p.Publish(s)
}

// TestJaggedRoundTrip writes jagged batches and reads them back: the
// schema keeps its keys, the ring is format 2.0, the tensors have the
// shapes of §5.2 and the lengths agree with the offsets.
func TestJaggedRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	p := create(t, shm.Config{Dir: dir, Name: "jagged", Slots: 4, SlotSize: 1 << 16, Fields: jaggedFields})
	c := open(t, dir, "jagged")
	if h := c.Header(); h.VersionMajor != 2 || h.VersionMinor != shm.VersionMinor || !slices.Equal(h.Fields[1].Keys, []string{"cat_0", "seq_0"}) {
		t.Fatalf("header %d.%d, keys %q; want 2.%d and [cat_0 seq_0]", h.VersionMajor, h.VersionMinor, h.Fields[1].Keys, shm.VersionMinor)
	}
	for _, tc := range []struct {
		rows    int
		lengths []int64
	}{
		{3, []int64{1, 0, 1, 5, 0, 2}},
		{1, []int64{0, 0}},
		{2, []int64{1, 1, 64, 3}},
	} {
		if err := writeJagged(ctx, p, tc.rows, tc.lengths); err != nil {
			t.Fatal(err)
		}
		b, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lens := b.Tensor("sparse", shm.RoleLengths)
		offs := b.Tensor("sparse", shm.RoleOffsets)
		if lens == nil || offs == nil || !slices.Equal(lens.Shape, []int64{int64(2 * tc.rows)}) || !slices.Equal(offs.Shape, []int64{int64(2*tc.rows + 1)}) {
			t.Fatalf("rows %d: lengths %v, offsets %v", tc.rows, lens, offs)
		}
		for i, l := range tc.lengths {
			if got := int64(binary.LittleEndian.Uint64(lens.Data[8*i:])); got != l {
				t.Errorf("rows %d: lengths[%d] = %d, want %d", tc.rows, i, got, l)
			}
		}
		c.Release()
	}
}

// TestJaggedVersion checks that a ring without a jagged field stays
// format 1.0, which every 1.x reader reads.
func TestJaggedVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	create(t, shm.Config{Dir: dir, Name: "plain", Slots: 4, SlotSize: 1 << 16, Fields: testFields})
	c := open(t, dir, "plain")
	if h := c.Header(); h.VersionMajor != 1 || h.VersionMinor != shm.VersionMinor {
		t.Fatalf("a ring without jagged fields is %d.%d, want 1.%d", h.VersionMajor, h.VersionMinor, shm.VersionMinor)
	}
}

// TestJaggedRejects checks the schema rules of a jagged field (§4.1) and
// that a slot whose lengths disagree with its offsets is refused.
func TestJaggedRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		f    shm.Field
		want string
	}{
		{"no keys", shm.Field{Name: "s", Kind: shm.Jagged, DType: shm.Int64}, "0 keys"},
		{"duplicate key", shm.Field{Name: "s", Kind: shm.Jagged, DType: shm.Int64, Keys: []string{"a", "a"}}, `both "a"`},
		{"long key", shm.Field{Name: "s", Kind: shm.Jagged, DType: shm.Int64, Keys: []string{strings.Repeat("k", 64)}}, "1 to 63 bytes"},
		{"nullable", shm.Field{Name: "s", Kind: shm.Jagged, DType: shm.Int64, Keys: []string{"a"}, Nullable: true}, "no flags"},
		{"keys on dense", shm.Field{Name: "s", Kind: shm.Dense, DType: shm.Int64, Keys: []string{"a"}}, "only a jagged field"},
	} {
		_, err := shm.Create(shm.Config{Dir: t.TempDir(), Name: "bad", Slots: 2, SlotSize: 1 << 16, Fields: []shm.Field{tc.f}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}

	ctx := context.Background()
	dir := t.TempDir()
	p := create(t, shm.Config{Dir: dir, Name: "jagged", Slots: 4, SlotSize: 1 << 16, Fields: jaggedFields})
	s, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.SetRows(1)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.AddTensor(0, shm.RoleDense, shm.Float32, make([]byte, 12), 1, 3))
	must(s.AddTensor(1, shm.RoleValues, shm.Int64, i64bytes([]int64{5, 6}), 2))
	must(s.AddTensor(1, shm.RoleOffsets, shm.Int64, i64bytes([]int64{0, 1, 2}), 3))
	must(s.AddTensor(1, shm.RoleLengths, shm.Int64, i64bytes([]int64{2, 0}), 2))
	must(s.AddTensor(2, shm.RoleValues, shm.Int64, nil, 0))
	must(s.AddTensor(2, shm.RoleOffsets, shm.Int64, make([]byte, 16), 2))
	if err := p.Publish(s); err == nil || !strings.Contains(err.Error(), "lengths: entry 0 is 2, the offsets say 1") {
		t.Errorf("publish with lengths that disagree with the offsets: %v", err)
	}
}

// TestJaggedKeyTable checks the key table parser on damaged schema blocks.
func TestJaggedKeyTable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := create(t, shm.Config{Dir: dir, Name: "keys", Slots: 2, SlotSize: 1 << 16, Fields: jaggedFields})
	b, err := os.ReadFile(p.Path())
	if err != nil {
		t.Fatal(err)
	}
	h, err := shm.ParseHeader(b, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	schema := b[h.SchemaOffset : h.SchemaOffset+h.SchemaLen]
	for _, tc := range []struct {
		name  string
		patch func(s []byte)
		want  string
	}{
		{"zero keys", func(s []byte) { binary.LittleEndian.PutUint32(s[8+96+68:], 0) }, "key_count 0"},
		{"keys past the block", func(s []byte) { binary.LittleEndian.PutUint64(s[8+96+72:], uint64(len(s))) }, "do not lie after"},
		{"keys over the entries", func(s []byte) { binary.LittleEndian.PutUint64(s[8+96+72:], 8) }, "do not lie after"},
		{"unterminated key", func(s []byte) { copy(s[len(s)-64:], strings.Repeat("x", 64)) }, "not NUL-terminated"},
		{"duplicate key", func(s []byte) { copy(s[len(s)-64:], "cat_0\x00\x00\x00\x00\x00") }, `both "cat_0"`},
	} {
		s := slices.Clone(schema)
		tc.patch(s)
		_, err := shm.ParseSchema(s)
		if err == nil || !errors.Is(err, shm.ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want ErrCorrupt containing %q", tc.name, err, tc.want)
		}
	}
}
