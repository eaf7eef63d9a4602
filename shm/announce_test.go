package shm_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/shm"
)

// TestAnnouncement: the producer's block reaches the consumer, a change
// bumps the sequence number, an empty block withdraws it, the size limit
// holds, and a new producer adopting the ring withdraws its predecessor's
// block (format x.2).
func TestAnnouncement(t *testing.T) {
	cfg := testConfig(t, "ann", 4)
	p := create(t, cfg)
	c := open(t, cfg.Dir, cfg.Name)
	if h := c.Header(); h.VersionMinor != 2 {
		t.Fatalf("a new ring is x.%d, want x.2", h.VersionMinor)
	}
	if b, seq, err := c.Announcement(); len(b) != 0 || seq != 0 || err != nil {
		t.Fatalf("a new ring announces %q (seq %d, %v); want nothing, seq 0", b, seq, err)
	}
	var last uint32
	for _, want := range [][]byte{[]byte("first"), bytes.Repeat([]byte{7}, shm.MaxAnnouncement), []byte("x"), nil} {
		if err := p.Announce(want); err != nil {
			t.Fatal(err)
		}
		got, seq, err := c.Announcement()
		if err != nil || !bytes.Equal(got, want) || seq%2 != 0 || seq <= last {
			t.Fatalf("announced %d bytes, read %d (seq %d after %d, %v)", len(want), len(got), seq, last, err)
		}
		last = seq
	}
	if err := p.Announce(make([]byte, shm.MaxAnnouncement+1)); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("an oversized announcement: %v", err)
	}
	// Bytes past a shorter block are zero: the longer one left nothing.
	mem, err := os.ReadFile(filepath.Join(cfg.Dir, cfg.Name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mem[1544:4096], make([]byte, 4096-1544)) {
		t.Fatal("a withdrawn announcement left bytes behind")
	}

	// A torn write (odd sequence) is not read; a length past the area is
	// an error, not a panic.
	binary.LittleEndian.PutUint32(mem[1536:], 9)
	if _, _, err := shm.ReadAnnouncement(mem); err == nil || !strings.Contains(err.Error(), "mid-write") {
		t.Fatalf("an odd announce_seq: %v", err)
	}
	binary.LittleEndian.PutUint32(mem[1536:], 10)
	binary.LittleEndian.PutUint32(mem[1540:], 5000)
	if _, _, err := shm.ReadAnnouncement(mem); err == nil || !strings.Contains(err.Error(), "announce_len 5000") {
		t.Fatalf("announce_len 5000: %v", err)
	}

	// Adoption withdraws.
	if err := p.Announce([]byte("handles of the old producer")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	q, err := shm.Adopt(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if b, seq, err := c.Announcement(); len(b) != 0 || seq <= last || err != nil {
		t.Fatalf("after adoption: %q, seq %d, %v; want withdrawn", b, seq, err)
	}
}

// FuzzReadAnnouncement: page 0 comes from a file another process writes:
// any announce_seq, announce_len and block give a copy of at most
// MaxAnnouncement bytes or an error, never a panic or a hang.
func FuzzReadAnnouncement(f *testing.F) {
	f.Add(uint32(2), uint32(5), []byte("hello"))
	f.Add(uint32(3), uint32(0), []byte{})
	f.Add(uint32(4), uint32(1<<31), []byte{1})
	f.Fuzz(func(t *testing.T, seq, n uint32, block []byte) {
		mem := make([]byte, 4096)
		binary.LittleEndian.PutUint32(mem[1536:], seq)
		binary.LittleEndian.PutUint32(mem[1540:], n)
		copy(mem[1544:], block)
		b, got, err := shm.ReadAnnouncement(mem)
		if err != nil {
			return
		}
		if seq%2 == 1 || got != seq || len(b) != int(n) || len(b) > shm.MaxAnnouncement {
			t.Fatalf("seq %d, len %d: read %d bytes at seq %d", seq, n, len(b), got)
		}
	})
}
