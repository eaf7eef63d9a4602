package shm

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Futex operations. The ring's futex words are shared between processes,
// so FUTEX_PRIVATE_FLAG must never be set (§6.3).
const (
	futexWaitOp = 0 // FUTEX_WAIT
	futexWakeOp = 1 // FUTEX_WAKE
)

// futexWait sleeps while *word == val, for at most timeout. It returns true
// if the timeout expired; a wake-up, a changed word (EAGAIN) or a signal
// (EINTR) return false: the caller re-checks its condition either way.
//
// unix.Syscall6, not RawSyscall6: the call may block for the whole timeout,
// and the Go scheduler must be told so that it can run other goroutines on
// this thread's P meanwhile.
func futexWait(word *atomic.Uint32, val uint32, timeout time.Duration) bool {
	ts := unix.NsecToTimespec(int64(timeout))
	_, _, errno := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)), futexWaitOp,
		uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
	return errno == unix.ETIMEDOUT
}

// futexWake wakes up to n waiters on word.
func futexWake(word *atomic.Uint32, n int) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)), futexWakeOp, uintptr(n), 0, 0, 0)
}
