package gpu

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Memory policy modes and flags (linux/mempolicy.h).
const (
	mpolPreferred = 1
	mpolFNode     = 1 << 0
	mpolFAddr     = 1 << 1
	maxNodes      = 1024
)

// ErrPolicy is OnNode's error when it could not set the memory policy,
// and so did not run f.
var ErrPolicy = errors.New("NUMA memory policy not set")

// OnNode runs f on an OS thread of its own whose memory policy prefers
// NUMA node node: pages f allocates (a ring's fallocate on tmpfs, its
// first touches) come from that node while it has free memory, and from
// the nearest other node after (MPOL_PREFERRED, not MPOL_BIND: a full
// node slows the ring, it does not kill the daemon).
//
// The thread is locked to a fresh goroutine that never unlocks it, so
// the runtime discards the thread, policy and all, when f returns: no
// other goroutine ever runs under the policy.
func OnNode(node int, f func() error) error {
	if node < 0 || node >= maxNodes {
		return fmt.Errorf("%w: NUMA node %d: want 0 to %d", ErrPolicy, node, maxNodes-1)
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		var mask [maxNodes / 64]uint64
		mask[node/64] |= 1 << (node % 64)
		_, _, e := unix.Syscall(unix.SYS_SET_MEMPOLICY, mpolPreferred,
			uintptr(unsafe.Pointer(&mask[0])), maxNodes+1)
		if e != 0 {
			done <- fmt.Errorf("%w: set_mempolicy(MPOL_PREFERRED, node %d): %w", ErrPolicy, node, e)
			return
		}
		done <- f()
	}()
	return <-done
}

// PageNode returns the NUMA node of the page at the start of b, which
// must be faulted in.
func PageNode(b []byte) (int, error) {
	if len(b) == 0 {
		return -1, fmt.Errorf("page node: empty range")
	}
	var node int32
	_, _, e := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&node)), 0, 0,
		uintptr(unsafe.Pointer(&b[0])), mpolFNode|mpolFAddr, 0)
	if e != 0 {
		return -1, fmt.Errorf("get_mempolicy(MPOL_F_NODE|MPOL_F_ADDR): %w", e)
	}
	return int(node), nil
}

// Nodes returns the online NUMA nodes (/sys/devices/system/node/online);
// [0] when the kernel has no NUMA support.
func Nodes() []int {
	b, err := os.ReadFile("/sys/devices/system/node/online")
	if err != nil {
		return []int{0}
	}
	n, err := ParseCPUList(strings.TrimSpace(string(b))) // the same list syntax
	if err != nil || len(n) == 0 {
		return []int{0}
	}
	return n
}
