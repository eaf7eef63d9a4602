//go:build linux && cgo

package cuda_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/lastmile/lastmile/cuda"
	"github.com/lastmile/lastmile/cuda/cudatest"
	"golang.org/x/sys/unix"
)

// open builds the fake and opens it with device 0's context retained.
func open(t *testing.T) (*cudatest.Fake, *cuda.Driver, *cuda.Context) {
	t.Helper()
	f := cudatest.Build(t)
	d, err := cuda.Open(cuda.Config{})
	if err != nil {
		t.Fatalf("open the fake: %v", err)
	}
	if d.Path() != f.Library {
		t.Fatalf("opened %s, want the fake %s (LASTMILE_LIBCUDA)", d.Path(), f.Library)
	}
	c, err := d.Retain(0)
	if err != nil {
		t.Fatal(err)
	}
	return f, d, c
}

// ringFile makes a file of size bytes to map, as a ring is.
func ringFile(t *testing.T, size int64) int {
	t.Helper()
	return ringFileIn(t, t.TempDir(), size)
}

// ringFileIn is ringFile in directory dir.
func ringFileIn(t *testing.T, dir string, size int64) int {
	t.Helper()
	fh, err := os.Create(filepath.Join(dir, "ring"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fh.Close() })
	if err := fh.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return int(fh.Fd())
}

// isMapped asks mincore(2), which fails with ENOMEM on an unmapped range.
func isMapped(b []byte) bool {
	vec := make([]byte, (len(b)+4095)/4096)
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	return e == 0
}

func TestOpenWithoutDriver(t *testing.T) {
	_, err := cuda.Open(cuda.Config{Library: filepath.Join(t.TempDir(), "libcuda.so.1")})
	var le *cuda.LoadError
	if !errors.As(err, &le) || !cuda.NoDriver(err) {
		t.Fatalf("Open of a missing library: %v, want a LoadError that NoDriver accepts", err)
	}
	if !strings.Contains(err.Error(), "LASTMILE_LIBCUDA") {
		t.Errorf("error %q does not say how to point at the library", err)
	}
	f := cudatest.Build(t)
	t.Setenv("FAKECUDA_DEVICES", "0")
	_, err = cuda.Open(cuda.Config{Library: f.Library})
	if !errors.Is(err, cuda.ErrNoDevice) || !cuda.NoDriver(err) {
		t.Fatalf("Open with no device: %v, want CUDA_ERROR_NO_DEVICE", err)
	}
	if !strings.Contains(err.Error(), "cuInit: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected") {
		t.Errorf("error %q lacks the call, the CUresult name and its text", err)
	}
}

func TestInventory(t *testing.T) {
	cudatest.Build(t)
	t.Setenv("FAKECUDA_DEVICES", "2")
	d, err := cuda.Open(cuda.Config{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := d.DeviceCount()
	if err != nil || n != 2 {
		t.Fatalf("DeviceCount = %d, %v; want 2", n, err)
	}
	info, err := d.Info(1)
	want := cuda.DeviceInfo{Ordinal: 1, Name: "Fake GPU 1", PCIBusID: "0000:3c:00.0", Memory: 80 << 30}
	if err != nil || info != want {
		t.Fatalf("Info(1) = %+v, %v; want %+v", info, err, want)
	}
	if _, err := d.Info(2); !errors.Is(err, cuda.ErrInvalidDevice) {
		t.Fatalf("Info(2) of 2 devices: %v, want CUDA_ERROR_INVALID_DEVICE", err)
	}
	if v, err := d.Attribute(0, cuda.AttrPCIBusID); err != nil || v != 0x3b {
		t.Fatalf("PCI bus attribute = %#x, %v", v, err)
	}
}

// TestRegisterCopyUnregister follows the life of a registered ring: map
// 2 MiB-aligned, register in place, copy a slot on a stream, wait for
// the copy's event, unregister, and only then unmap.
func TestRegisterCopyUnregister(t *testing.T) {
	f, _, c := open(t)
	const size = 6<<20 + 8192
	m, err := cuda.Map(ringFile(t, size), size)
	if err != nil {
		t.Fatal(err)
	}
	if addr := uintptr(unsafe.Pointer(&m.Bytes[0])); addr%cuda.RegisterAlign != 0 {
		t.Fatalf("Map gave %#x, not 2 MiB-aligned", addr)
	}
	if _, err := m.Register(c, cuda.RegisterPortable); err != nil {
		t.Fatal(err)
	}
	slot := m.Bytes[2<<20 : 3<<20]
	for i := range slot {
		slot[i] = byte(i * 7)
	}
	dst, err := c.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.NewStream(cuda.StreamNonBlocking)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := c.NewEvent(cuda.EventDisableTiming)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CopyHtoD(dst.Ptr, dst.Size, slot[:123456]); err != nil {
		t.Fatal(err)
	}
	if err := ev.Record(s); err != nil {
		t.Fatal(err)
	}
	if done, err := ev.Done(); !done || err != nil {
		t.Fatalf("event Done = %v, %v", done, err)
	}
	back := make([]byte, 123456)
	if err := c.CopyDtoH(back, dst.Ptr); err != nil || !bytes.Equal(back, slot[:123456]) {
		t.Fatalf("device copy differs from the slot (err %v)", err)
	}
	mem := m.Bytes
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if isMapped(mem) {
		t.Fatal("Close left the range mapped")
	}
	for _, step := range []func() error{ev.Destroy, s.Destroy, dst.Free, c.Release} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	calls := f.Calls(t, false)
	want := []string{"cuInit", "cuDevicePrimaryCtxRetain", "cuMemHostRegister_v2", "cuMemAlloc_v2",
		"cuStreamCreate", "cuEventCreate", "cuMemcpyHtoDAsync_v2", "cuEventRecord", "cuEventQuery",
		"cuMemcpyDtoH_v2", "cuMemHostUnregister", "cuEventDestroy_v2", "cuStreamDestroy_v2", "cuMemFree_v2",
		"cuDevicePrimaryCtxRelease_v2"}
	if got := cudatest.Names(calls); !slices.Equal(got, want) {
		t.Fatalf("calls:\n got %v\nwant %v", got, want)
	}
	reg := cudatest.Find(calls, "cuMemHostRegister_v2")[0].Args
	if reg["bytes"] != "6299648" || reg["align2m"] != "1" || reg["mapped"] != "1" || reg["flags"] != "1" {
		t.Errorf("registration %v: want the whole 6 MiB + 8 KiB mapping, 2 MiB-aligned, flags 1", reg)
	}
	if un := cudatest.Find(calls, "cuMemHostUnregister")[0].Args; un["mapped"] != "1" || un["ptr"] != reg["ptr"] {
		t.Errorf("unregistration %v: want the registered pointer %s, still mapped", un, reg["ptr"])
	}
	if cp := cudatest.Find(calls, "cuMemcpyHtoDAsync_v2")[0].Args; cp["bytes"] != "123456" || cp["pinned"] != "1" {
		t.Errorf("copy %v: want 123456 bytes from the registered range", cp)
	}
	if a := cudatest.Find(calls, "cuMemAlloc_v2")[0].Args; a["bytes"] != "1048576" {
		t.Errorf("allocation %v: want 1 MiB", a)
	}
	// Every call in the context made it current first, on the same thread.
	all := f.Calls(t, true)
	for i, call := range all {
		if i > 0 && call.Name == "cuMemcpyHtoDAsync_v2" && all[i-1].Name != "cuCtxSetCurrent" {
			t.Errorf("copy not preceded by cuCtxSetCurrent")
		}
	}
}

func TestRegisterRefusesBadRanges(t *testing.T) {
	f, _, c := open(t)
	const size = 4 << 20
	m, err := cuda.Map(ringFile(t, size), size)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, tc := range []struct {
		name string
		mem  []byte
		want string
	}{
		{"empty", m.Bytes[:0], "zero-byte"},
		{"unaligned start", m.Bytes[4096:], "not 2 MiB-aligned"},
		{"partial page", m.Bytes[:2<<20+100], "4 KiB pages"},
	} {
		if _, err := c.Register(tc.mem, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Register: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	if n := len(cudatest.Find(f.Calls(t, false), "cuMemHostRegister_v2")); n != 0 {
		t.Fatalf("%d registrations reached the driver; bad ranges must be refused before", n)
	}
	if _, err := c.Alloc(0); err == nil {
		t.Error("Alloc(0) succeeded")
	}
}

// TestInjectedFailures fails each call in turn and checks the error names
// the call, the CUresult's name and its text, and that nothing is leaked
// or left half-made.
func TestInjectedFailures(t *testing.T) {
	for _, tc := range []struct {
		fail string
		code cuda.Result
		name string
		run  func(c *cuda.Context, m *cuda.Mapping) error
	}{
		{"cuMemHostRegister_v2=1", 1, "CUDA_ERROR_INVALID_VALUE", func(c *cuda.Context, m *cuda.Mapping) error {
			_, err := m.Register(c, 0)
			return err
		}},
		{"cuMemAlloc_v2=2", 2, "CUDA_ERROR_OUT_OF_MEMORY", func(c *cuda.Context, m *cuda.Mapping) error {
			_, err := c.Alloc(1 << 20)
			return err
		}},
		{"cuMemAllocHost_v2=2", 2, "CUDA_ERROR_OUT_OF_MEMORY", func(c *cuda.Context, m *cuda.Mapping) error {
			_, err := c.AllocHost(1 << 20)
			return err
		}},
		{"cuStreamCreate=1", 1, "CUDA_ERROR_INVALID_VALUE", func(c *cuda.Context, m *cuda.Mapping) error {
			_, err := c.NewStream(0)
			return err
		}},
		{"cuEventCreate=1", 1, "CUDA_ERROR_INVALID_VALUE", func(c *cuda.Context, m *cuda.Mapping) error {
			_, err := c.NewEvent(0)
			return err
		}},
		{"cuMemcpyHtoDAsync_v2=1@2", 1, "CUDA_ERROR_INVALID_VALUE", func(c *cuda.Context, m *cuda.Mapping) error {
			b, _ := c.Alloc(4096)
			s, _ := c.NewStream(0)
			if err := s.CopyHtoD(b.Ptr, b.Size, m.Bytes[:4096]); err != nil {
				return errors.New("the first copy failed; only the second should")
			}
			return s.CopyHtoD(b.Ptr, b.Size, m.Bytes[:4096])
		}},
		{"cuIpcGetMemHandle=1", 1, "CUDA_ERROR_INVALID_VALUE", func(c *cuda.Context, m *cuda.Mapping) error {
			b, _ := c.Alloc(4096)
			_, err := b.IPCHandle()
			return err
		}},
		{"cuDevicePrimaryCtxRetain=101", 101, "CUDA_ERROR_INVALID_DEVICE", func(c *cuda.Context, m *cuda.Mapping) error {
			return errors.New("unreached")
		}},
	} {
		t.Run(tc.fail, func(t *testing.T) {
			f := cudatest.Build(t)
			f.Fail(t, tc.fail)
			d, err := cuda.Open(cuda.Config{})
			if err != nil {
				t.Fatal(err)
			}
			c, err := d.Retain(0)
			if err == nil {
				m, merr := cuda.Map(ringFile(t, 2<<20), 2<<20)
				if merr != nil {
					t.Fatal(merr)
				}
				defer m.Close()
				err = tc.run(c, m)
			}
			var ce *cuda.Error
			if !errors.As(err, &ce) || ce.Code != tc.code || ce.Name != tc.name || ce.Text == "" {
				t.Fatalf("error %v (%#v): want %s (%d) with its text", err, ce, tc.name, tc.code)
			}
			if call := strings.Split(tc.fail, "=")[0]; ce.Call != call {
				t.Errorf("error names call %s, want %s", ce.Call, call)
			}
			if c != nil && c.Usable() != nil {
				t.Errorf("a non-sticky error made the context unusable: %v", c.Usable())
			}
		})
	}
}

func TestStickyError(t *testing.T) {
	f, _, c := open(t)
	f.Fail(t, "cuMemcpyHtoDAsync_v2=700")
	m, err := cuda.Map(ringFile(t, 2<<20), 2<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b, _ := c.Alloc(4096)
	s, _ := c.NewStream(0)
	err = s.CopyHtoD(b.Ptr, b.Size, m.Bytes[:4096])
	if !errors.Is(err, cuda.ErrIllegalAddress) || !strings.Contains(err.Error(), "sticky") {
		t.Fatalf("copy: %v, want a sticky CUDA_ERROR_ILLEGAL_ADDRESS", err)
	}
	before := len(f.Calls(t, true))
	_, err = c.Alloc(4096)
	if !errors.Is(err, cuda.ErrContextUnusable) || !errors.Is(err, cuda.ErrIllegalAddress) {
		t.Fatalf("Alloc after a sticky error: %v, want ErrContextUnusable naming the first error", err)
	}
	if after := len(f.Calls(t, true)); after != before {
		t.Fatalf("%d driver calls after the context became unusable, want 0", after-before)
	}
	if err := c.Usable(); !errors.Is(err, cuda.ErrContextUnusable) {
		t.Fatalf("Usable = %v", err)
	}
}

func TestUnregisterFailureLeavesMapped(t *testing.T) {
	f, _, c := open(t)
	f.Fail(t, "cuMemHostUnregister=1")
	m, err := cuda.Map(ringFile(t, 2<<20), 2<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Register(c, 0); err != nil {
		t.Fatal(err)
	}
	mem := m.Bytes
	if err := m.Close(); err == nil || !strings.Contains(err.Error(), "left mapped") {
		t.Fatalf("Close with a failing unregistration: %v", err)
	}
	if !isMapped(mem) {
		t.Fatal("the range was unmapped although the driver may still hold it pinned")
	}
	f.Fail(t, "")
	if err := m.Close(); err != nil || isMapped(mem) {
		t.Fatalf("second Close: %v (mapped %v)", err, isMapped(mem))
	}
	// The second Close asked the driver again, before the unmap: a
	// Registration that marked itself done before its call skipped it.
	un := cudatest.Find(f.Calls(t, false), "cuMemHostUnregister")
	if len(un) != 2 || un[1].Result != 0 || un[1].Args["mapped"] != "1" {
		t.Fatalf("unregistrations %+v: want the failed one, then one that succeeded before the unmap", un)
	}
}

func TestIPC(t *testing.T) {
	f, _, c := open(t)
	b, err := c.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	h, err := b.IPCHandle()
	if err != nil {
		t.Fatal(err)
	}
	o, err := c.OpenIPC(h, b.Size)
	if err != nil || o.Ptr != b.Ptr {
		t.Fatalf("OpenIPC = %v, %v; want the exported allocation", o, err)
	}
	if err := o.Free(); err != nil {
		t.Fatal(err)
	}
	plain, _ := c.NewEvent(0)
	if _, err := plain.IPCHandle(); err == nil {
		t.Error("exported an event created without EventInterprocess")
	}
	ev, _ := c.NewEvent(cuda.EventInterprocess | cuda.EventDisableTiming)
	eh, err := ev.IPCHandle()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenIPCEvent(eh); err != nil {
		t.Fatal(err)
	}
	names := cudatest.Names(f.Calls(t, false))
	for _, want := range []string{"cuIpcGetMemHandle", "cuIpcOpenMemHandle_v2", "cuIpcCloseMemHandle", "cuIpcGetEventHandle", "cuIpcOpenEventHandle"} {
		if !slices.Contains(names, want) {
			t.Errorf("no %s call in %v", want, names)
		}
	}
	if slices.Contains(names, "cuMemFree_v2") {
		t.Error("an opened IPC allocation was freed with cuMemFree instead of closed")
	}
}

func TestEventNotReady(t *testing.T) {
	f, _, c := open(t)
	f.Fail(t, "cuEventQuery=600@1")
	s, _ := c.NewStream(0)
	ev, _ := c.NewEvent(0)
	ev.Record(s)
	if done, err := ev.Done(); done || err != nil {
		t.Fatalf("first Done = %v, %v; want false, nil (NOT_READY is not an error)", done, err)
	}
	if done, err := ev.Done(); !done || err != nil {
		t.Fatalf("second Done = %v, %v", done, err)
	}
}

// shmTempDir is a temporary directory on tmpfs, where rings live and
// where the driver can pin them (skips where /dev/shm is not tmpfs).
func shmTempDir(t *testing.T) string {
	t.Helper()
	if err := cuda.PinnableDir("/dev/shm"); err != nil {
		t.Skipf("no tmpfs at /dev/shm: %v", err)
	}
	d, err := os.MkdirTemp("/dev/shm", "lastmile-cuda-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// TestRegisterNamesTheFilesystem: a refused registration of a ring on a
// disk filesystem says why (the kernel will not pin such pages) and what
// to do; one on tmpfs is the driver's error alone.
func TestRegisterNamesTheFilesystem(t *testing.T) {
	for _, tc := range []struct {
		name string
		dir  func(t *testing.T) string
		hint bool
	}{
		{"tmpfs", shmTempDir, false},
		{"disk", func(t *testing.T) string {
			d := t.TempDir()
			if cuda.PinnableDir(d) == nil {
				t.Skipf("%s is on tmpfs here", d)
			}
			return d
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir(t)
			f, _, c := open(t)
			f.Fail(t, "cuMemHostRegister_v2=1")
			m, err := cuda.Map(ringFileIn(t, dir, 2<<20), 2<<20)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			_, err = m.Register(c, 0)
			var ce *cuda.Error
			if !errors.As(err, &ce) || ce.Code != 1 {
				t.Fatalf("error %v: want the driver's CUDA_ERROR_INVALID_VALUE wrapped", err)
			}
			if got := strings.Contains(err.Error(), "put rings on tmpfs"); got != tc.hint {
				t.Errorf("hint %v, want %v: %v", got, tc.hint, err)
			}
		})
	}
}

func TestPinnableDir(t *testing.T) {
	if err := cuda.PinnableDir(shmTempDir(t)); err != nil {
		t.Errorf("tmpfs: %v", err)
	}
	if err := cuda.PinnableDir(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "statfs") {
		t.Errorf("a missing directory: %v, want the statfs error", err)
	}
	d := t.TempDir()
	if err := cuda.PinnableDir(d); err == nil {
		t.Logf("%s is on tmpfs here: the disk case is not checked", d)
	} else if !strings.Contains(err.Error(), d) || !strings.Contains(err.Error(), "/dev/shm") {
		t.Errorf("a disk directory: %v, want it named and /dev/shm suggested", err)
	}
}
