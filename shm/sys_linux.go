package shm

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// fallocateChunk bounds one fallocate call: tmpfs undoes a whole call that
// a signal interrupts (EINTR), so a huge single call could be retried
// forever; chunks keep their progress.
const fallocateChunk = 64 << 20

// reserve allocates the whole file so that a small /dev/shm fails here and
// not with SIGBUS on a later page fault.
func reserve(fd int, size int64) error {
	for off := int64(0); off < size; {
		n := min(size-off, fallocateChunk)
		err := unix.Fallocate(fd, 0, off, n)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		off += n
	}
	return nil
}

// freeBytes returns the bytes available to unprivileged users in dir's
// filesystem, or -1 if it cannot tell.
func freeBytes(dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * st.Bsize
}

// monotonicNow returns CLOCK_MONOTONIC in ns, the clock of the heartbeats.
func monotonicNow() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano())
}

// heartbeatAge converts a heartbeat timestamp to its age.
func heartbeatAge(ns uint64) time.Duration {
	now := monotonicNow()
	if ns == 0 || now < ns {
		return 0
	}
	return time.Duration(now - ns)
}

// processStart returns field 22 of /proc/PID/stat: the process's start
// time in clock ticks since boot. 0 if unknown.
func processStart(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Field 2 (comm) may contain spaces and parentheses: fields 3 and on
	// follow the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return 0
	}
	v, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// processAlive reports whether pid names a live process (or one we may not
// signal, which is alive too).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || err == unix.EPERM
}

// mapFile maps size bytes of fd shared, read-write. populate asks the
// kernel to fault every page in now (the consumer's mapping).
func mapFile(fd int, size int64, populate bool) ([]byte, error) {
	flags := unix.MAP_SHARED
	if populate {
		flags |= unix.MAP_POPULATE
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", size, err)
	}
	return mem, nil
}
