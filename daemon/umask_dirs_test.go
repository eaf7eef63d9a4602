package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCreatedDirsReachableUnderUmask: under the unit's UMask=0077 the
// directories lastmiled creates for trainers (shm_dir, and the socket's
// directory, with their missing parents) must still be traversable by
// every user: rings are fchowned to their users and the socket is
// chmodded, but a 0700 directory of the daemon's user above them made
// every attach fail with EACCES (shm_dir: /dev/shm/lastmile, a
// subdirectory the docs' drop-in allows).
func TestCreatedDirsReachableUnderUmask(t *testing.T) {
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	var shmDir, sockDir string
	startControl(t, func(c *Config) {
		shmDir = filepath.Join(filepath.Dir(c.ShmDir), "shm-parent", "lastmile")
		sockDir = filepath.Join(filepath.Dir(c.ShmDir), "run", "lastmile")
		c.ShmDir, c.Socket = shmDir, filepath.Join(sockDir, "lastmiled.sock")
	})
	for _, dir := range []string{shmDir, filepath.Dir(shmDir), sockDir, filepath.Dir(sockDir)} {
		st, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&0o055 != 0o055 {
			t.Errorf("%s created %v under umask 0077: want it traversable and listable by every user (0755)", dir, st.Mode().Perm())
		}
	}
}
