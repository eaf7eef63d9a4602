//go:build linux && cgo

package gpu_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/cuda"
	"github.com/lastmile/lastmile/cuda/cudatest"
	"github.com/lastmile/lastmile/gpu"
	"github.com/lastmile/lastmile/shm"
	"golang.org/x/sys/unix"
)

func TestDeviceRing(t *testing.T) {
	f, c, path := gpu.FakeDeviceRing(t)
	r, err := gpu.OpenDeviceRing(c, path, "0000:3b:00.0", 7)
	if err != nil {
		t.Fatal(err)
	}
	// Fill ring slot 1 through a mapping of our own, as the producer does.
	m := mapRing(t, path)
	h, _ := shm.ParseHeader(m.Bytes, int64(len(m.Bytes)))
	slot := m.Bytes[h.DataOffset+h.SlotSize : h.DataOffset+2*h.SlotSize]
	for i := range slot[:100000] {
		slot[i] = byte(i * 3)
	}
	if err := r.Stage(5, 100000); err != nil { // batch 5 lives in slot 1
		t.Fatal(err)
	}
	ptr, _ := r.DeviceSlot(1)
	back := make([]byte, 100000)
	if err := c.CopyDtoH(back, ptr); err != nil || !bytes.Equal(back, slot[:100000]) {
		t.Fatalf("device slot 1 differs from ring slot 1 (err %v)", err)
	}
	if err := r.Stage(6, h.SlotSize+1); err == nil {
		t.Fatal("staged more bytes than a slot holds")
	}
	b, err := r.Announcement()
	if err != nil {
		t.Fatal(err)
	}
	a, ok, err := gpu.ParseAnnouncement(b)
	if err != nil || !ok || a.Slots != 4 || a.Generation != 7 || a.PCIBusID != "0000:3b:00.0" {
		t.Fatalf("announcement %+v, %v, %v", a, ok, err)
	}
	// The trainer's side: the handles open to the same memory.
	o, err := c.OpenIPC(a.Mem, 4*h.SlotSize)
	if err != nil || o.Ptr != r.DeviceSlotBase() {
		t.Fatalf("opened %v, %v", o, err)
	}
	o.Free()
	if !deviceSlotsLocked(t, path) {
		t.Fatal("byte 2 (device slots) is not locked while the device ring is open")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if deviceSlotsLocked(t, path) {
		t.Fatal("byte 2 (device slots) is still locked after Close")
	}
	calls := f.Calls(t, false)
	reg, unreg := cudatest.Find(calls, "cuMemHostRegister_v2"), cudatest.Find(calls, "cuMemHostUnregister")
	if len(reg) != 1 || reg[0].Args["align2m"] != "1" || len(unreg) != 1 || unreg[0].Args["mapped"] != "1" {
		t.Fatalf("register %v, unregister %v", reg, unreg)
	}
	evs := cudatest.Find(calls, "cuEventCreate")
	if len(evs) != 4 || evs[0].Args["flags"] != "6" || len(cudatest.Find(calls, "cuEventDestroy_v2")) != 4 {
		t.Fatalf("events %v: want 4 interprocess, timing-off events, all destroyed", evs)
	}
	names := cudatest.Names(calls)
	if i, j := index(names, "cuMemFree_v2"), index(names, "cuMemHostUnregister"); i < 0 || j < i {
		t.Fatalf("calls %v: device slots freed, then the ring unregistered", names)
	}
}

func index(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func mapRing(t *testing.T, path string) *cuda.Mapping {
	t.Helper()
	f, err := openRW(path)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	m, err := cuda.Map(int(f.Fd()), st.Size())
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestDeviceRingFailures fails each step of OpenDeviceRing and Stage and
// checks the error, and that what was made is undone: every allocation
// freed, the ring unregistered if it was registered.
func TestDeviceRingFailures(t *testing.T) {
	for _, fail := range []string{"cuMemHostRegister_v2=1", "cuMemAlloc_v2=2", "cuStreamCreate=1", "cuEventCreate=2@3"} {
		t.Run(fail, func(t *testing.T) {
			f, c, path := gpu.FakeDeviceRing(t)
			f.Fail(t, fail)
			_, err := gpu.OpenDeviceRing(c, path, "", 1)
			var ce *cuda.Error
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), "stays with host staging") {
				t.Fatalf("OpenDeviceRing with %s: %v", fail, err)
			}
			calls := f.Calls(t, false)
			if a, fr := len(cudatest.Find(calls, "cuMemAlloc_v2")), len(cudatest.Find(calls, "cuMemFree_v2")); fail != "cuMemAlloc_v2=2" && a != fr {
				t.Errorf("%d allocations, %d frees", a, fr)
			}
			if ce.Call != "cuMemHostRegister_v2" && len(cudatest.Find(calls, "cuMemHostUnregister")) != 1 {
				t.Errorf("registered ring not unregistered: %v", cudatest.Names(calls))
			}
			if n := len(cudatest.Find(calls, "cuEventCreate")) - 1; fail == "cuEventCreate=2@3" && len(cudatest.Find(calls, "cuEventDestroy_v2")) != n {
				t.Errorf("events made before the failure were not destroyed: %v", cudatest.Names(calls))
			}
		})
	}
	t.Run("sticky copy", func(t *testing.T) {
		f, c, path := gpu.FakeDeviceRing(t)
		r, err := gpu.OpenDeviceRing(c, path, "", 1)
		if err != nil {
			t.Fatal(err)
		}
		f.Fail(t, "cuMemcpyHtoDAsync_v2=700")
		if err := r.Stage(0, 4096); !errors.Is(err, cuda.ErrIllegalAddress) {
			t.Fatalf("Stage: %v", err)
		}
		f.Fail(t, "")
		if err := r.Stage(1, 4096); !errors.Is(err, cuda.ErrContextUnusable) {
			t.Fatalf("Stage after a sticky error: %v, want ErrContextUnusable", err)
		}
		if err := r.Close(); err == nil {
			t.Fatal("Close in an unusable context reported no error")
		}
	})
	t.Run("too many slots", func(t *testing.T) {
		cudatest.Build(t)
		dir := t.TempDir()
		p, err := shm.Create(shm.Config{Dir: dir, Name: "many", Slots: 40, SlotSize: 4096,
			Fields: []shm.Field{{Name: "b", Kind: shm.Dense, DType: shm.Uint8}}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Remove()
		defer p.Close()
		d, _ := cuda.Open(cuda.Config{})
		c, _ := d.Retain(0)
		if _, err := gpu.OpenDeviceRing(c, filepath.Join(dir, "many"), "", 1); err == nil || !strings.Contains(err.Error(), "at most 38") {
			t.Fatalf("40 slots: %v", err)
		}
	})
}

func openRW(path string) (*os.File, error) { return os.OpenFile(path, os.O_RDWR, 0) }

// deviceSlotsLocked probes byte 2 of the ring as a trainer does (§6.4):
// another open file holds it while the device slots are valid.
func deviceSlotsLocked(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Start: 2, Len: 1}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		t.Fatal(err)
	}
	return lk.Type != unix.F_UNLCK
}
