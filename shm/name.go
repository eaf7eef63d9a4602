package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Creating a ring's name safely in a shared directory (see trust.go).
//
// The temporary file is created with O_CREAT|O_EXCL|O_NOFOLLOW under
// DIR/.NAME.tmp-PID-RANDOM: nothing planted there is ever opened, and the
// random part keeps a planted file from blocking the name. The finished
// file is moved into place with renameat2(RENAME_NOREPLACE) when the name
// was free, so a file or link planted meanwhile is never replaced blindly:
// the name is checked again, as at the start. Only a stale ring is
// replaced with rename(2), and only while the name still is the very file
// claimName checked (trusted, a valid ring, its byte-0 lock held by us).
// In a sticky directory only that file's owner (a trusted uid), the
// directory's owner or a privileged process can change the name between
// that check and the rename; and rename replaces the name itself, never
// writing through a link or into the file it replaces.

// staleRing is an existing ring file under a ring's name whose producer
// is dead: its byte-0 lock is held on fd.
type staleRing struct {
	fd       int
	dev, ino uint64
	arena    uint64 // the unit arena it names (format 4.x), 0: none
	uid      uint32 // its owner
}

// release closes s, dropping its lock; a nil s is nothing.
func (s *staleRing) release() {
	if s != nil {
		unix.Close(s.fd)
	}
}

// claimName checks an existing file at path (§6.4). It returns nil if
// there is none, or the stale ring whose byte-0 lock it now holds. A live
// ring fails with ErrInUse, an untrusted file with ErrUntrusted, a file
// that is not a ring with an error asking to remove it.
func claimName(path string, owner uint32) (*staleRing, error) {
	fd, st, err := openTrusted(path, unix.O_RDWR, owner)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("existing file: %w", err)
	}
	var hdr [offArenaSize + 8]byte
	n, _ := unix.Pread(fd, hdr[:], 0)
	if err := lockByte(fd, producerLockByte); err != nil {
		unix.Close(fd)
		if err == errLocked {
			pid := int32(binary.LittleEndian.Uint32(hdr[offProducerPID:]))
			return nil, fmt.Errorf("%w: %s belongs to a live producer (pid %d): stop it, or choose another ring name", ErrInUse, path, pid)
		}
		return nil, fmt.Errorf("lock existing %s: %w", path, err)
	}
	if n < len(magic) || [8]byte(hdr[:8]) != magic {
		unix.Close(fd)
		return nil, fmt.Errorf("%s exists and is not a lastmile ring: remove it, or choose another ring name", path)
	}
	old := &staleRing{fd: fd, dev: st.Dev, ino: st.Ino, uid: st.Uid}
	if n == len(hdr) && binary.LittleEndian.Uint16(hdr[offVersionMajor:]) >= 4 {
		old.arena = binary.LittleEndian.Uint64(hdr[offArenaID:])
	}
	return old, nil
}

// createTemp creates the temporary file of ring name in dir, with mode.
func createTemp(dir, name string, mode os.FileMode) (int, string, error) {
	prefix := filepath.Join(dir, "."+name+".tmp-"+strconv.Itoa(os.Getpid())+"-")
	for attempt := 0; ; attempt++ {
		r, err := randomU64()
		if err != nil {
			return -1, "", err
		}
		tmp := prefix + fmt.Sprintf("%016x", r)
		fd, err := unix.Open(tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(mode))
		if errors.Is(err, unix.EEXIST) && attempt < 3 {
			continue // someone planted a file under this very name
		}
		if err != nil {
			return -1, "", fmt.Errorf("create %s: %w", tmp, err)
		}
		return fd, tmp, nil
	}
}

// installRing moves the finished temporary file tmp to path (see the top
// of this file). old is what claimName returned; installRing returns the
// stale ring it replaced, still locked, for the caller to release after
// (nil if none), also with an error.
func installRing(tmp, path string, old *staleRing, owner uint32) (*staleRing, error) {
	for attempt := 0; attempt < 3; attempt++ {
		if old == nil {
			err := renameNoReplace(tmp, path)
			if err == nil {
				return nil, nil
			}
			if !errors.Is(err, unix.EEXIST) {
				return nil, fmt.Errorf("rename %s to %s: %w", tmp, path, err)
			}
		} else if sameFile(path, old.dev, old.ino) {
			if err := unix.Rename(tmp, path); err != nil {
				return old, fmt.Errorf("rename %s over the stale ring %s: %w", tmp, path, err)
			}
			return old, nil
		}
		// The name changed since it was checked: check it again.
		old.release()
		var err error
		if old, err = claimName(path, owner); err != nil {
			return nil, err
		}
	}
	old.release()
	return nil, fmt.Errorf("%s kept changing while this producer installed its ring: is another program creating files under that name? stop it, or choose another ring name", path)
}

// renameNoReplace renames from to to, failing with EEXIST if to exists
// (a file, a link, anything).
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if err != unix.EINVAL && err != unix.ENOSYS {
		return err
	}
	// A file system without RENAME_NOREPLACE: link(2) never replaces either.
	if err := unix.Linkat(unix.AT_FDCWD, from, unix.AT_FDCWD, to, 0); err != nil {
		return err
	}
	return unix.Unlink(from)
}

// removeStaleTemps deletes temporary files of producers that died while
// creating this ring: named .NAME.tmp-PID or .NAME.tmp-PID-RANDOM, their
// pid gone, a trusted regular file with one link (never a symbolic link:
// it is skipped, not followed), and their byte-0 lock free.
func removeStaleTemps(dir, name string, owner uint32) {
	prefix := "." + name + ".tmp-"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, found := strings.CutPrefix(e.Name(), prefix)
		if !found || !e.Type().IsRegular() {
			continue
		}
		pid, ok := tempPID(rest)
		if !ok || processAlive(pid) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		fd, st, err := openTrusted(p, unix.O_RDWR, owner)
		if err != nil {
			continue
		}
		if lockByte(fd, producerLockByte) == nil && sameFile(p, st.Dev, st.Ino) {
			unix.Unlink(p)
		}
		unix.Close(fd)
	}
}

// tempPID parses the part of a temporary name after ".tmp-": PID, or
// PID-RANDOM with 16 hex digits.
func tempPID(rest string) (int, bool) {
	num, random, hasRandom := strings.Cut(rest, "-")
	if hasRandom {
		if len(random) != 16 {
			return 0, false
		}
		if _, err := strconv.ParseUint(random, 16, 64); err != nil {
			return 0, false
		}
	}
	pid, err := strconv.Atoi(num)
	if err != nil || pid <= 0 || strconv.Itoa(pid) != num {
		return 0, false
	}
	return pid, true
}
