package gpu_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/cuda"
	"github.com/lastmile/lastmile/gpu"
)

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
