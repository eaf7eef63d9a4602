package shm

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Trust in the ring directory
//
// /dev/shm is world-writable (sticky): anyone may plant a file, a symbolic
// link, a hard link or a FIFO under the name a ring is about to get, and
// lastmiled, which runs privileged (CAP_DAC_OVERRIDE, CAP_FOWNER), could
// otherwise open and write through it. So every existing file this package
// opens under a ring's name (Create's stale-ring check, Claim, Adopt,
// Take, the consumer's Open, the cleanup of temporary files) is opened
// with O_NOFOLLOW and O_NONBLOCK (a planted FIFO never blocks the open),
// and then, on the open descriptor, must be
//
//   - a regular file;
//   - with exactly one link (a hard link to a file elsewhere is refused);
//   - owned by a trusted uid: this process's effective uid, root, or the
//     uid the caller names (Config.Owner, OpenOptions.Owner, Claim's
//     owner): the trainer a daemon gives its rings to.
//
// Otherwise the open fails with ErrUntrusted and an error naming the file,
// its owner and what to do; nothing of the file is locked, written or
// mapped, and it is never replaced or removed. Files are created with
// O_CREAT|O_EXCL|O_NOFOLLOW only, under a temporary name with a random
// part, and moved into place with renameat2(RENAME_NOREPLACE); see
// installRing for the one case that replaces a name.

// openExisting are the flags of every open of an existing file under a
// ring's name, besides the access mode.
const openExisting = unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK

// trustedUID reports whether a file owned by uid may be used by a caller
// that expects owner: uid is owner, root, or this process's effective uid.
func trustedUID(uid, owner uint32) bool {
	return uid == owner || uid == 0 || uid == uint32(os.Geteuid())
}

// trustedOwners describes the uids trustedUID accepts, for errors.
func trustedOwners(owner uint32) string {
	self := uint32(os.Geteuid())
	var who []string
	if owner != 0 && owner != self {
		who = append(who, "uid "+strconv.FormatUint(uint64(owner), 10)+" (the expected owner)")
	}
	if self != 0 {
		who = append(who, "uid "+strconv.FormatUint(uint64(self), 10)+" (this process)")
	}
	if len(who) == 0 {
		return "root"
	}
	return strings.Join(who, ", ") + " or root"
}

// openTrusted opens the existing file path with flags (an access mode) and
// checks it with checkTrusted. An error wraps ErrNotExist if there is no
// file, and ErrUntrusted if the file may not be used.
func openTrusted(path string, flags int, owner uint32) (int, unix.Stat_t, error) {
	fd, err := unix.Open(path, flags|openExisting, 0)
	if err != nil {
		return -1, unix.Stat_t{}, openError(path, err)
	}
	st, err := checkTrusted(fd, path, owner)
	if err != nil {
		unix.Close(fd)
		return -1, unix.Stat_t{}, err
	}
	return fd, st, nil
}

// openError explains a failed open of an existing file under a ring's name.
func openError(path string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("no ring at %s: %w", path, os.ErrNotExist)
	case errors.Is(err, unix.ELOOP):
		var st unix.Stat_t
		owner := "an unknown user"
		if unix.Lstat(path, &st) == nil {
			owner = "uid " + strconv.FormatUint(uint64(st.Uid), 10)
		}
		return fmt.Errorf("%w: %s is a symbolic link (owned by %s); lastmile never follows links under a ring's name: "+
			"remove it (check who planted it first), or choose another ring name", ErrUntrusted, path, owner)
	}
	return fmt.Errorf("open %s: %w", path, err)
}

// checkTrusted checks the file open on fd, found at path, by the rules at
// the top of this file, and returns its status.
func checkTrusted(fd int, path string, owner uint32) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return st, fmt.Errorf("stat %s: %w", path, err)
	}
	uid := strconv.FormatUint(uint64(st.Uid), 10)
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return st, fmt.Errorf("%w: %s (owned by uid %s) is not a regular file but a %s: "+
			"remove it (check who created it first), or choose another ring name", ErrUntrusted, path, uid, fileKind(st.Mode))
	case st.Nlink != 1:
		return st, fmt.Errorf("%w: %s (owned by uid %s) has %d hard links, so it is also another file: "+
			"remove this name (check who created it first), or choose another ring name", ErrUntrusted, path, uid, st.Nlink)
	case !trustedUID(st.Uid, owner):
		return st, fmt.Errorf("%w: %s is owned by uid %s, and lastmile uses only ring files owned by %s: "+
			"someone else created it; remove it (check who did first), or choose another ring name", ErrUntrusted, path, uid, trustedOwners(owner))
	}
	return st, nil
}

// fileKind names the type of a file for errors.
func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return "file of unknown type"
}

// sameFile reports whether path itself (not followed) is still the file
// with dev and ino.
func sameFile(path string, dev, ino uint64) bool {
	var st unix.Stat_t
	return unix.Lstat(path, &st) == nil && st.Dev == dev && st.Ino == ino
}
