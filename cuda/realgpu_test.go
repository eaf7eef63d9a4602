//go:build linux && cgo

package cuda_test

import (
	"bytes"
	"flag"
	"testing"

	"github.com/lastmile/lastmile/cuda"
)

// realGPU runs the tests that need a real GPU and driver: make gpu-test.
var realGPU = flag.Bool("gpu", false, "run the tests that need a real NVIDIA GPU and driver (make gpu-test)")

// TestRealGPU registers a 2 MiB-aligned shared mapping with the real
// driver, copies it to the device and back, and unregisters it.
func TestRealGPU(t *testing.T) {
	if !*realGPU {
		t.Skip("needs a GPU: run with -gpu (make gpu-test)")
	}
	d, err := cuda.Open(cuda.Config{})
	if cuda.NoDriver(err) {
		t.Skipf("no GPU or driver: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Retain(0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	const size = 8 << 20
	m, err := cuda.Map(shmRingFile(t, size), size)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Register(c, cuda.RegisterPortable); err != nil {
		t.Fatal(err)
	}
	for i := range m.Bytes {
		m.Bytes[i] = byte(i * 13)
	}
	dst, err := c.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Free()
	s, err := c.NewStream(cuda.StreamNonBlocking)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	if err := s.CopyHtoD(dst.Ptr, dst.Size, m.Bytes); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, size)
	if err := c.CopyDtoH(back, dst.Ptr); err != nil || !bytes.Equal(back, m.Bytes) {
		t.Fatalf("round trip through the device differs (err %v)", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// shmRingFile is ringFile on tmpfs: the kernel pins no shared mapping of a
// disk file for the driver (pinfs_linux.go), and rings live on tmpfs.
func shmRingFile(t *testing.T, size int64) int {
	t.Helper()
	return ringFileIn(t, shmTempDir(t), size)
}
