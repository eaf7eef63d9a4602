package cuda

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Which files' pages the driver can pin in place.
//
// cuMemHostRegister takes a long-term pin of every page of the range
// (pin_user_pages with FOLL_LONGTERM). Since Linux 6.5 the kernel refuses
// that pin, for writing, on a shared mapping of a file whose filesystem
// tracks dirty pages for writeback: every disk and network filesystem
// (ext4, xfs, btrfs, NFS, FUSE, overlayfs over them). The driver then
// answers CUDA_ERROR_INVALID_VALUE, which names nothing of the cause.
// tmpfs (/dev/shm) and hugetlbfs have no writeback, and their pages pin.
// Found on an H100 host (kernel 6.18): a ring file in /tmp on ext4
// failed to register, the same ring in /dev/shm registered.

const (
	tmpfsMagic     = 0x01021994
	hugetlbfsMagic = 0x958458f6
)

// fsNames names the filesystems an operator is likely to have put rings on.
var fsNames = map[int64]string{
	tmpfsMagic:     "tmpfs",
	hugetlbfsMagic: "hugetlbfs",
	0xef53:         "ext2/3/4",
	0x58465342:     "xfs",
	0x9123683e:     "btrfs",
	0x794c7630:     "overlayfs",
	0x6969:         "nfs",
	0x65735546:     "fuse",
	0x2fc12fc1:     "zfs",
}

// fsName names the filesystem of statfs magic m.
func fsName(m int64) string {
	if n, ok := fsNames[m]; ok {
		return n
	}
	return fmt.Sprintf("filesystem type %#x", m)
}

// pinnable reports whether shared mappings of files on the filesystem of
// statfs magic m can be registered in place.
func pinnable(m int64) bool { return m == tmpfsMagic || m == hugetlbfsMagic }

// PinnableDir checks that rings made in dir can be registered with the
// driver in place. It returns nil for tmpfs and hugetlbfs, and otherwise
// an error naming the filesystem and what to do.
func PinnableDir(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	if pinnable(int64(st.Type)) {
		return nil
	}
	return fmt.Errorf("%s is on %s: %w", dir, fsName(int64(st.Type)), errNotPinnable)
}

// errNotPinnable says why a ring on a disk filesystem cannot be registered.
var errNotPinnable = errors.New("Linux (6.5 and later) does not pin shared file mappings of " +
	"a filesystem with writeback for DMA, so CUDA cannot register rings there; put rings on tmpfs " +
	"(/dev/shm, lastmiled's default shm_dir)")

// fdFSType returns the statfs magic of fd's filesystem, 0 if unknown.
func fdFSType(fd int) int64 {
	var st unix.Statfs_t
	if unix.Fstatfs(fd, &st) != nil {
		return 0
	}
	return int64(st.Type)
}
