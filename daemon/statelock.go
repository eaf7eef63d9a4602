package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// stateLockName is the file in state_dir that a running lastmiled holds
// an exclusive flock on, for its whole life.
const stateLockName = "lock"

// lockStateDir takes the state directory for this process: an exclusive
// flock on STATE_DIR/lock, which the kernel drops when the process exits
// (kill -9 included), so restarts need no cleanup. A second lastmiled on
// the same state_dir (another socket, a debugging run) would load the
// first one's jobs, fail them in its own view for want of their rings,
// and then delete their records under the running daemon: it is refused
// here, before any record is read. The holder's pid is written into the
// file, for the error. The descriptor is close-on-exec: no child keeps
// the lock.
func lockStateDir(stateDir string) (int, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return -1, fmt.Errorf("state directory: %w", err)
	}
	path := filepath.Join(stateDir, stateLockName)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return -1, fmt.Errorf("state directory lock %s: %w", path, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			holder := "another process"
			if pid := lockHolder(path); pid > 0 {
				holder = fmt.Sprintf("another lastmiled (pid %d)", pid)
			}
			return -1, fmt.Errorf("state_dir %s is in use by %s: two daemons must not share a state directory (its lock %s is held); stop it first, or give this one its own state_dir, shm_dir and socket",
				stateDir, holder, path)
		}
		return -1, fmt.Errorf("lock state directory %s: %w", path, err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := unix.Ftruncate(fd, 0); err == nil {
		unix.Pwrite(fd, pid, 0) // for the error above only: the lock is what counts
	}
	return fd, nil
}

// lockHolder returns the pid written in the lock file at path, 0 if
// none can be read.
func lockHolder(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
