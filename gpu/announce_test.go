package gpu_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/cuda"
	"github.com/lastmile/lastmile/gpu"
	"github.com/lastmile/lastmile/shm"
)

var update = flag.Bool("update", false, "rewrite testdata/announcement-1.2.golden")

func TestAnnouncementRoundTrip(t *testing.T) {
	a := gpu.Announcement{Slots: 3, PCIBusID: "0000:3b:00.0", Generation: 42,
		Events: make([]cuda.IPCEventHandle, 3)}
	a.Mem[0], a.Mem[63] = 7, 9
	a.Events[2][5] = 1
	b, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 96+3*64 || gpu.AnnounceOffset+len(b) > 4096 {
		t.Fatalf("%d bytes", len(b))
	}
	got, ok, err := gpu.ParseAnnouncement(b)
	if err != nil || !ok || !reflect.DeepEqual(got, a) {
		t.Fatalf("parsed %+v, %v, %v; want %+v", got, ok, err, a)
	}
	if _, ok, err := gpu.ParseAnnouncement(make([]byte, 2560)); ok || err != nil {
		t.Fatalf("an empty block: ok %v, %v; want no announcement", ok, err)
	}
	for _, tc := range []struct {
		a    gpu.Announcement
		want string
	}{
		{gpu.Announcement{Slots: 0}, "0 slots"},
		{gpu.Announcement{Slots: 39, Events: make([]cuda.IPCEventHandle, 39)}, "39 slots"},
		{gpu.Announcement{Slots: 2, Events: make([]cuda.IPCEventHandle, 1)}, "1 event handles"},
		{gpu.Announcement{Slots: 1, Events: make([]cuda.IPCEventHandle, 1), PCIBusID: strings.Repeat("x", 17)}, "longer than 16"},
	} {
		if _, err := tc.a.Encode(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Encode(%d slots): %v, want %q", tc.a.Slots, err, tc.want)
		}
	}
}

// FuzzParseAnnouncement: the block is read from a ring file, outside
// input: any bytes give an announcement that encodes back to the same
// prefix, no announcement, or an error; never a panic.
func FuzzParseAnnouncement(f *testing.F) {
	a := gpu.Announcement{Slots: 2, PCIBusID: "0000:3b:00.0", Generation: 1, Events: make([]cuda.IPCEventHandle, 2)}
	b, _ := a.Encode()
	f.Add(b)
	f.Add(make([]byte, 96))
	f.Add([]byte{1, 0, 0, 0, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, ok, err := gpu.ParseAnnouncement(b)
		if err != nil || !ok {
			return
		}
		enc, err := a.Encode()
		if err != nil {
			if strings.Contains(err.Error(), "PCI bus id") {
				return
			}
			t.Fatalf("a parsed announcement does not encode: %v", err)
		}
		// The bus id is NUL-padded: compare what survives the round trip.
		got, _, _ := gpu.ParseAnnouncement(enc)
		if !reflect.DeepEqual(got, a) || !bytes.Equal(enc[32:], b[32:len(enc)]) {
			t.Fatalf("round trip changed the announcement")
		}
	})
}

// TestAnnouncementGolden pins the bytes a device-staged ring carries at
// page 0 bytes 1536-4095 (docs/ring-format.md 3.6, 3.6.1), as shm's
// Announce writes gpu's block: testdata/announcement-1.2.golden, which
// the Python client's test parses too (python/tests/test_devstage.py), so
// the two sides cannot drift apart. -update rewrites it.
func TestAnnouncementGolden(t *testing.T) {
	a := gpu.Announcement{Slots: 2, PCIBusID: "0000:3b:00.0", Generation: 0x0102030405060708,
		Events: make([]cuda.IPCEventHandle, 2)}
	for i := range a.Mem {
		a.Mem[i] = byte(i)
	}
	for k := range a.Events {
		for i := range a.Events[k] {
			a.Events[k][i] = byte(0x80 + 16*k + i%16)
		}
	}
	b, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p, err := shm.Create(shm.Config{Dir: dir, Name: "g", Slots: 2, SlotSize: 4096,
		Fields: []shm.Field{{Name: "b", Kind: shm.Dense, DType: shm.Uint8}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Remove()
	defer p.Close()
	if err := p.Announce(b); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(filepath.Join(dir, "g"))
	if err != nil {
		t.Fatal(err)
	}
	got := file[1536:4096]
	golden := filepath.Join("testdata", "announcement-1.2.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -run TestAnnouncementGolden -update ./gpu writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("page 0 bytes 1536-4095 differ from %s: the ring format changed (update docs/ring-format.md and the Python client)", golden)
	}
}
