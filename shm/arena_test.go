package shm_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/shm"
)

// arenaRing creates a ring of testFields that names a new arena of 8 KiB.
func arenaRing(t testing.TB, name string) (*shm.Producer, *shm.Arena) {
	cfg := testConfig(t, name, 3)
	a, err := shm.CreateArena(shm.ArenaConfig{Dir: cfg.Dir, Size: 8192})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Arena = a
	p, err := shm.Create(cfg)
	if err != nil {
		a.Remove()
		t.Fatal(err)
	}
	return p, a
}

// writeArenaBatch writes batch seq of testFields with the label and the
// ids' values in the arena (at off and off+256), the rest in the slot.
func writeArenaBatch(ctx context.Context, p *shm.Producer, a *shm.Arena, seq uint64, off int) error {
	s, err := p.Acquire(ctx)
	if err != nil {
		return err
	}
	s.SetRows(batchRows(seq))
	s.SetCursor(batchCursor(seq))
	for i, td := range expectBatch(seq) {
		if i == 0 || (td.field == 2 && td.role == shm.RoleValues) {
			dst := a.Data()[off+i*256 : off+i*256+len(td.data)]
			copy(dst, td.data)
			err = s.AddArena(td.field, td.role, td.dtype, dst, td.shape...)
		} else {
			err = s.AddTensor(td.field, td.role, td.dtype, td.data, td.shape...)
		}
		if err != nil {
			p.Discard(s)
			return err
		}
	}
	return p.Publish(s)
}

// Tensors in the arena reach the consumer as views of it, equal to what
// was written; the rest come from the slot as before.
func TestArenaRoundTrip(t *testing.T) {
	p, a := arenaRing(t, "arena")
	defer a.Remove()
	defer p.Close()
	ctx := testCtx(t)
	for seq := uint64(0); seq < 3; seq++ {
		if err := writeArenaBatch(ctx, p, a, seq, int(seq)*2048); err != nil {
			t.Fatal(err)
		}
	}
	c, err := shm.Open(filepath.Dir(p.Path()), "arena")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if h := c.Header(); h.VersionMajor != 4 || h.ArenaID != a.ID() || h.ArenaSize != 8192 {
		t.Fatalf("header %d.%d arena %#x of %d; want 4.x naming %#x of 8192", h.VersionMajor, h.VersionMinor, h.ArenaID, h.ArenaSize, a.ID())
	}
	for seq := uint64(0); seq < 3; seq++ {
		b, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkBatch(b, seq); err != nil {
			t.Fatal(err)
		}
		for i, tn := range b.Tensors {
			if want := i == 0 || (tn.Field == 2 && tn.Role == shm.RoleValues); tn.InArena != want {
				t.Errorf("batch %d tensor %d (%s %v): in the arena %v, want %v", seq, i, tn.Name, tn.Role, tn.InArena, want)
			}
		}
	}
}

// AddArena takes only payloads in the ring's arena, of a role that may
// lie there, aligned, of the tensor's size.
func TestAddArenaRefusals(t *testing.T) {
	p, a := arenaRing(t, "refuse")
	defer a.Remove()
	defer p.Close()
	plain, err := shm.Create(testConfig(t, "plain", 2))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	heap := make([]byte, 64)
	for _, tc := range []struct {
		name  string
		p     *shm.Producer
		field int
		role  shm.Role
		dtype shm.DType
		data  []byte
		shape []int64
		want  string
	}{
		{"a ring without an arena", plain, 0, shm.RoleDense, shm.Float32, a.Data()[:16], []int64{4}, "does not lie in the ring's arena"},
		{"heap memory", p, 0, shm.RoleDense, shm.Float32, heap[:16], []int64{4}, "does not lie in the ring's arena"},
		{"misaligned", p, 0, shm.RoleDense, shm.Float32, a.Data()[2:18], []int64{4}, "not a multiple"},
		{"the wrong size", p, 0, shm.RoleDense, shm.Float32, a.Data()[:12], []int64{4}, "12 bytes of data"},
		{"the wrong field", p, 1, shm.RoleDense, shm.Int32, a.Data()[:64], []int64{4, 4}, "must be field 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tc.p.Acquire(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			defer tc.p.Discard(s)
			s.SetRows(4)
			err = s.AddArena(tc.field, tc.role, tc.dtype, tc.data, tc.shape...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v; want an error saying %q", err, tc.want)
			}
		})
	}
	// Offsets and validity never lie in the arena.
	s, err := p.Acquire(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Discard(s)
	s.SetRows(4)
	s.AddTensor(0, shm.RoleDense, shm.Float32, make([]byte, 16), 4)
	s.AddTensor(1, shm.RoleDense, shm.Int32, make([]byte, 64), 4, 4)
	s.AddArena(2, shm.RoleValues, shm.Int64, a.Data()[:0], 0)
	if err := s.AddArena(2, shm.RoleOffsets, shm.Int64, a.Data()[:40], 5); err == nil || !strings.Contains(err.Error(), "cannot lie in the arena") {
		t.Fatalf("offsets in the arena: %v; want refused", err)
	}
}

// Every entry of place 1 is checked against the arena (§8.2).
func TestParseSlotArena(t *testing.T) {
	p, a := arenaRing(t, "parse")
	defer a.Remove()
	if err := writeArenaBatch(testCtx(t), p, a, 0, 0); err != nil {
		t.Fatal(err)
	}
	p.Close()
	file, err := os.ReadFile(p.Path())
	if err != nil {
		t.Fatal(err)
	}
	h, err := shm.ParseHeader(file, int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	arena, err := os.ReadFile(a.Path())
	if err != nil {
		t.Fatal(err)
	}
	slot := file[h.DataOffset : h.DataOffset+h.SlotSize]
	if _, _, err := shm.ParseSlotArena(slot, testFields, nil, arena); err != nil {
		t.Fatal(err)
	}
	const entry0 = 64 // tensor 0, the label, lies in the arena
	le := binary.LittleEndian
	for _, tc := range []struct {
		name  string
		edit  func(s []byte)
		arena []byte
		want  string
	}{
		{"no arena", func([]byte) {}, nil, "the ring has none"},
		{"place 2", func(s []byte) { s[entry0+5] = 2 }, arena, "place 2"},
		{"reserved byte 6", func(s []byte) { s[entry0+6] = 1 }, arena, "reserved bytes"},
		{"in the arena's header", func(s []byte) { le.PutUint64(s[entry0+40:], 0) }, arena, "within the arena's data"},
		{"past its end", func(s []byte) { le.PutUint64(s[entry0+40:], uint64(len(arena))-4) }, arena, "within the arena's data"},
		{"misaligned", func(s []byte) { le.PutUint64(s[entry0+40:], 4098) }, arena, "not 4-aligned"},
		{"offsets in the arena", func(s []byte) { s[64+3*64+5] = 1 }, arena, "only dense, values and weights"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := bytes.Clone(slot)
			tc.edit(s)
			_, _, err := shm.ParseSlotArena(s, testFields, nil, tc.arena)
			if err == nil || !errors.Is(err, shm.ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v; want ErrCorrupt saying %q", err, tc.want)
			}
		})
	}
}

// An arena whose id or size disagree with the ring, or that is missing,
// keeps the ring from opening, with an error naming it; a producer that
// replaces a dead producer's ring reports the arena it named.
func TestArenaOpenAndReplace(t *testing.T) {
	p, a := arenaRing(t, "open")
	dir := filepath.Dir(p.Path())
	p.Close() // finished: the next producer of the name replaces it
	good, err := os.ReadFile(a.Path())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(b []byte) []byte
		want string
	}{
		{"wrong id", func(b []byte) []byte { b[8]++; return b }, "arena_id"},
		{"wrong size", func(b []byte) []byte { b[16+1]++; return b }, "arena size"},
		{"not an arena", func(b []byte) []byte { b[0] = 'X'; return b }, "magic"},
		{"truncated", func(b []byte) []byte { return b[:4096] }, "bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(a.Path(), tc.edit(bytes.Clone(good)), 0o600); err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(a.Path(), good, 0o600)
			_, err := shm.Open(dir, "open")
			if err == nil || !strings.Contains(err.Error(), a.Path()) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v; want an error naming %s and saying %q", err, a.Path(), tc.want)
			}
		})
	}
	cfg := testConfig(t, "open", 3)
	cfg.Dir = dir
	q, err := shm.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	// Create leaves the replaced ring's arena (another ring of its job
	// may name it) and says which it was, and whose.
	id, uid := q.ReplacedArena()
	if id != a.ID() || uid != uint32(os.Geteuid()) || q.NamedArena() != 0 {
		t.Fatalf("replaced arena %#x of uid %d, named %#x; want %#x of uid %d, none", id, uid, q.NamedArena(), a.ID(), os.Geteuid())
	}
	if _, err := os.Stat(a.Path()); err != nil {
		t.Fatalf("the replaced ring's arena: %v; want it left to the caller", err)
	}
	// RemoveArena removes only a file of one of the owners named.
	if ok, err := shm.RemoveArena(dir, id, uid+1); ok || err != nil {
		t.Fatalf("RemoveArena with another owner: %v %v; want it left", ok, err)
	}
	if ok, err := shm.RemoveArena(dir, id, uid); !ok || err != nil {
		t.Fatalf("RemoveArena: %v %v", ok, err)
	}
	if _, err := os.Stat(a.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the arena after RemoveArena: %v; want it gone", err)
	}
}

// FuzzParseSlotArena parses slots of a ring with an arena: whatever it
// accepts lies in the slot's used bytes, or in the arena's data aligned
// to its dtype.
func FuzzParseSlotArena(f *testing.F) {
	p, a := arenaRing(f, "seed-arena")
	defer a.Remove()
	ctx := testCtx(f)
	for seq := uint64(0); seq < 3; seq++ {
		if err := writeArenaBatch(ctx, p, a, seq, int(seq)*1024); err != nil {
			f.Fatal(err)
		}
	}
	p.Close()
	file, err := os.ReadFile(p.Path())
	if err != nil {
		f.Fatal(err)
	}
	arena, err := os.ReadFile(a.Path())
	if err != nil {
		f.Fatal(err)
	}
	addSlotSeeds(f, file)
	f.Fuzz(func(t *testing.T, b []byte) {
		sh, tensors, err := shm.ParseSlotArena(b, testFields, nil, arena)
		if err != nil {
			return
		}
		for _, tn := range tensors {
			end := tn.Offset + int64(len(tn.Data))
			switch {
			case tn.InArena && (tn.Offset < shm.ArenaHeaderSize || end > int64(len(arena)) || tn.Offset%int64(tn.DType.Size()) != 0):
				t.Fatalf("tensor %s %v at arena %d+%d outside its data (%d bytes)", tn.Name, tn.Role, tn.Offset, len(tn.Data), len(arena))
			case !tn.InArena && (end > sh.UsedBytes || tn.Offset%shm.PayloadAlign != 0):
				t.Fatalf("tensor %s %v at %d+%d outside used_bytes %d", tn.Name, tn.Role, tn.Offset, len(tn.Data), sh.UsedBytes)
			}
		}
	})
}

// An arena the ring directory has no room for fails at creation, saying
// how much it needs and what to do.
func TestArenaNoSpace(t *testing.T) {
	dir := t.TempDir()
	// Far more than any test machine's free space: fallocate fails.
	_, err := shm.CreateArena(shm.ArenaConfig{Dir: dir, Size: 1 << 45})
	if err == nil {
		t.Skip("the file system reserved 32 TiB")
	}
	for _, want := range []string{"for the unit arena", dir, "enlarge it", "without ring.arena"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v; want it to say %q", err, want)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
		t.Errorf("left after the failure: %v", left)
	}
}

// ArenaConfig.Claim sees each id before a file of that name exists; its
// error stops the creation and leaves no file.
func TestCreateArenaClaim(t *testing.T) {
	for _, fail := range []bool{false, true} {
		dir := t.TempDir()
		var ids []uint64
		a, err := shm.CreateArena(shm.ArenaConfig{Dir: dir, Size: 1 << 16, Claim: func(id uint64) error {
			if _, err := os.Lstat(filepath.Join(dir, shm.ArenaName(id))); err == nil {
				t.Errorf("arena %s existed when claimed", shm.ArenaName(id))
			}
			ids = append(ids, id)
			if fail {
				return errors.New("no record")
			}
			return nil
		}})
		left, _ := filepath.Glob(filepath.Join(dir, "arena+*"))
		switch {
		case fail && (err == nil || !strings.Contains(err.Error(), "no record") || len(left) != 0):
			t.Errorf("a failed claim: %v, files %v", err, left)
		case !fail && (err != nil || len(ids) != 1 || a.ID() != ids[0]):
			t.Errorf("claimed %v, created %v (%v)", ids, a, err)
		}
		if a != nil {
			a.Remove()
		}
	}
}
