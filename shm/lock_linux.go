package shm

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Record locks on single bytes of the ring file (§6.4): byte 0 is held by
// the producer, byte 1 by the consumer. They are open-file-description
// locks (F_OFD_SETLK): owned by the open file, not the process, so two
// descriptors of one process conflict like two processes do (which is what
// lets tests run a producer and a consumer in one process), closing some
// other descriptor of the file does not drop them, and the kernel drops
// them when the holder dies, however it dies.
const (
	producerLockByte = 0
	consumerLockByte = 1
	// deviceSlotsLockByte is held by whoever holds the ring's announced
	// device slots (lastmiled's device staging, §3.6.1), from before the
	// announcement until the slots are freed: past the producer's close,
	// while the trainer still reads its last batches from them.
	deviceSlotsLockByte = 2
)

// LockDeviceSlots takes the device-slots lock (byte 2, §6.4) on fd's open
// file; closing that file, or the holder's death, drops it. A trainer that
// finds byte 0 free (the producer closed) but byte 2 held knows the device
// slots of the announcement are still there.
func LockDeviceSlots(fd int) error {
	if err := lockByte(fd, deviceSlotsLockByte); err != nil {
		return fmt.Errorf("lock byte %d of the ring (device slots): %w", deviceSlotsLockByte, err)
	}
	return nil
}

var errLocked = errors.New("byte is locked by another open file")

func flockByte(typ int16, b int64) unix.Flock_t {
	return unix.Flock_t{Type: typ, Whence: 0, Start: b, Len: 1}
}

// lockByte takes a write lock on byte b without blocking; errLocked if
// another open file description holds it.
func lockByte(fd int, b int64) error {
	lk := flockByte(unix.F_WRLCK, b)
	for {
		err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
		switch err {
		case nil:
			return nil
		case unix.EINTR:
			continue
		case unix.EAGAIN, unix.EACCES:
			return errLocked
		}
		return err
	}
}

// unlockByte drops this open file's lock on byte b.
func unlockByte(fd int, b int64) error {
	lk := flockByte(unix.F_UNLCK, b)
	return unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
}

// byteLocked reports whether another open file description holds a lock on
// byte b. It uses F_OFD_GETLK, which takes no lock: a probe can never make
// a concurrent attach or reclaim fail.
func byteLocked(fd int, b int64) (bool, error) {
	lk := flockByte(unix.F_WRLCK, b)
	for {
		err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &lk)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, err
		}
		return lk.Type != unix.F_UNLCK, nil
	}
}
