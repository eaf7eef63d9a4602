package shm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Leftover rings (docs/ring-format.md §6.7)
//
// A ring file outlives its stream, and the next producer of its name
// replaces it with a new generation. A consumer that starts before that
// producer must not take the old file for its ring: it would see the end
// of the stream at once, or the death of a producer long gone, while the
// new ring is renamed over the name. So a consumer that waits for its ring
// (WaitOpen) treats a leftover like a missing file.
//
// A ring is a leftover when nothing in it is left to deliver (head ==
// tail) and nothing ever will be: its stream is finished for good (state
// 1 or 2, final from format 1.1 on), or its producer is dead (byte 0
// unlocked while the stream runs, reloaded as §6.4 says). The second kind
// may still be continued by an adopting producer: then byte 0 is locked
// again and the ring stops being a leftover, which is why WaitOpen probes
// the name afresh each time instead of waiting for the inode to change.
//
// The probe maps page 0 only, read-only, and never locks or writes: a
// leftover may be a large file, and WaitOpen probes it every 50 ms.
//
// Rejected: ending the wait as soon as a file of another generation than
// the first one seen appears (a consumer that starts after its producer
// created the ring, but before it published anything, would wait for a
// generation that never comes); comparing created_unix_ns with the
// consumer's start time (clocks, and a producer may legitimately create
// its ring before its consumer starts).

// leftoverPoll is how often WaitOpen looks at the ring's name again.
const leftoverPoll = 50 * time.Millisecond

// probeLeftover looks at the file under path and returns a description of
// it if it is a leftover ring, "" if it is a ring to read (or something
// OpenWith will reject with its own error). An error wrapping
// os.ErrNotExist means there is no file.
func probeLeftover(path string) (string, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|openExisting, 0)
	if err != nil {
		return "", openError(path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size < pageSize {
		return "", nil // OpenWith says what is wrong with it
	}
	mem, err := unix.Mmap(fd, 0, pageSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return "", nil
	}
	defer unix.Munmap(mem)
	if u64At(mem, offMagic).Load() != magicWord {
		return "", nil
	}
	return leftoverState(mem, fd), nil
}

// leftoverState describes the ring whose page 0 is mem (file fd) if it is
// a leftover, else returns "".
func leftoverState(mem []byte, fd int) string {
	state := u32At(mem, offState)
	tail, head := u64At(mem, offTail), u64At(mem, offHead)
	st := State(state.Load()) // state before tail, as the consumer does (§6.2)
	if tail.Load() != head.Load() {
		return ""
	}
	if st == StateRunning {
		if locked, err := byteLocked(fd, producerLockByte); err != nil || locked {
			return ""
		}
		// The lock is free: reload, as §6.4 says, before calling it dead
		// (a producer that closed just now stored state and tail first).
		st = State(state.Load())
		if tail.Load() != head.Load() {
			return ""
		}
	}
	n := head.Load()
	if st == StateRunning {
		pid := int32(u32At(mem, offProducerPID).Load())
		return fmt.Sprintf("its producer (pid %d) died after %d batches, all of them read", pid, n)
	}
	what := "ended"
	if st == StateFailed {
		what = "failed"
	}
	if ns := u64At(mem, offEndedUnixNano).Load(); ns != 0 {
		what += " " + time.Since(time.Unix(0, int64(ns))).Round(time.Second).String() + " ago"
	}
	msg := ""
	if l := min(u32At(mem, offMessageLen).Load(), MaxMessageLen); l > 0 {
		msg = fmt.Sprintf(" (%q)", mem[offMessage:offMessage+l])
	}
	return fmt.Sprintf("its stream %s%s after %d batches, all of them read", what, msg, n)
}

// WaitOpen attaches a consumer to the ring dir/name as OpenWith does,
// waiting up to wait for a ring to read (§6.7): while there is no file
// under the name, or while the file is a leftover of an earlier run (its
// stream finished for good, or its producer dead, and every batch read),
// it looks again every 50 ms. So a consumer started before its producer
// gets the producer's new ring, not the old one of the same name.
//
// When wait ends with only a leftover there, WaitOpen attaches to it, so
// that Next reports its end of stream (io.EOF) or its producer's death as
// usual, and Consumer.Leftover says what it is; with no file, it returns
// OpenWith's error (wrapping os.ErrNotExist). Other errors of OpenWith
// end the wait at once. ctx cancels the wait.
func WaitOpen(ctx context.Context, dir, name string, opts OpenOptions, wait time.Duration) (*Consumer, error) {
	if dir == "" {
		dir = DefaultDir()
	}
	if err := validRingName(name); err != nil {
		return nil, fmt.Errorf("open ring %q: %w", name, err)
	}
	path := filepath.Join(dir, name)
	deadline := time.Now().Add(wait)
	for {
		what, err := probeLeftover(path)
		last := !time.Now().Before(deadline)
		switch {
		case err == nil && (what == "" || last):
			c, err := OpenWith(dir, name, opts)
			if err != nil && errors.Is(err, os.ErrNotExist) && !last {
				break // removed between the probe and the open: wait on
			}
			if c != nil && what != "" {
				c.leftover = "ring " + path + " is left from an earlier run: " + what +
					"; no new ring replaced it within " + wait.String()
			}
			return c, err
		case err != nil && !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("open ring %q: %w", name, err)
		case last:
			return OpenWith(dir, name, opts) // its error says there is no ring
		}
		t := time.NewTimer(min(leftoverPoll, max(time.Until(deadline), 0)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("open ring %q: %w", name, ctx.Err())
		case <-t.C:
		}
	}
}
