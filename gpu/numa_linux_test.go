package gpu_test

import (
	"errors"
	"os"
	"testing"

	"github.com/lastmile/lastmile/gpu"
	"golang.org/x/sys/unix"
)

// TestOnNode creates a tmpfs file's pages under OnNode, as a ring's are,
// and asks the kernel where they landed.
func TestOnNode(t *testing.T) {
	if _, err := os.Stat("/dev/shm"); err != nil {
		t.Skip("no /dev/shm")
	}
	for _, node := range gpu.Nodes() {
		f, err := os.CreateTemp("/dev/shm", "lastmile-numa-test-")
		if err != nil {
			t.Skip("cannot create in /dev/shm:", err)
		}
		os.Remove(f.Name())
		defer f.Close()
		const size = 4 << 20
		err = gpu.OnNode(node, func() error { return unix.Fallocate(int(f.Fd()), 0, 0, size) })
		if err != nil {
			t.Fatalf("OnNode(%d): %v", node, err)
		}
		mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			t.Fatal(err)
		}
		got, err := gpu.PageNode(mem[size-4096:])
		unix.Munmap(mem)
		if err != nil || got != node {
			t.Fatalf("pages allocated under OnNode(%d) are on node %d (%v)", node, got, err)
		}
	}
	if err := gpu.OnNode(900, func() error { t.Fatal("f ran under a failed policy"); return nil }); !errors.Is(err, gpu.ErrPolicy) {
		t.Fatal("OnNode of an offline node succeeded")
	}
	if err := gpu.OnNode(-1, func() error { return nil }); err == nil {
		t.Fatal("OnNode(-1) succeeded")
	}
}
