package shm_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/lastmile/lastmile/shm"
)

// Producer.Chown gives the file the producer made, whatever the ring's
// name in the shared directory leads to by then: a user who replaced the
// name with a hard link to, or a new file beside, another file gets
// nothing of that file.
func TestProducerChownByDescriptor(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another user needs root")
	}
	const uid, gid = 4242, 4343
	cases := []struct {
		name  string
		plant func(t *testing.T, ring, victim string)
	}{
		{"name replaced by a hard link", func(t *testing.T, ring, victim string) {
			os.Remove(ring)
			if err := os.Link(victim, ring); err != nil {
				t.Fatal(err)
			}
		}},
		{"name replaced by a symbolic link", func(t *testing.T, ring, victim string) {
			os.Remove(ring)
			if err := os.Symlink(victim, ring); err != nil {
				t.Fatal(err)
			}
		}},
		{"name left alone", func(t *testing.T, ring, victim string) {}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p, err := shm.Create(shm.Config{Dir: dir, Name: "r", Slots: 2, SlotSize: 8192, Fields: testFields})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			ours, err := os.Stat(filepath.Join(dir, "r"))
			if err != nil {
				t.Fatal(err)
			}
			victim := filepath.Join(dir, "victim")
			if err := os.WriteFile(victim, []byte("root's"), 0o600); err != nil {
				t.Fatal(err)
			}
			c.plant(t, filepath.Join(dir, "r"), victim)
			if err := p.Chown(uid, gid); err != nil {
				t.Fatal(err)
			}
			if st := stat(t, victim); st.Uid != 0 || st.Gid != 0 {
				t.Errorf("the planted file went to %d:%d", st.Uid, st.Gid)
			}
			// The ring's own file, seen through the producer's descriptor.
			st := new(syscall.Stat_t)
			if err := syscall.Fstat(p.Fd(), st); err != nil {
				t.Fatal(err)
			}
			if st.Ino != ours.Sys().(*syscall.Stat_t).Ino || st.Uid != uid || st.Gid != gid {
				t.Errorf("the ring's file: inode %d (ours %d), owner %d:%d", st.Ino, ours.Sys().(*syscall.Stat_t).Ino, st.Uid, st.Gid)
			}
		})
	}
}

func stat(t *testing.T, path string) *syscall.Stat_t {
	t.Helper()
	st := new(syscall.Stat_t)
	if err := syscall.Stat(path, st); err != nil {
		t.Fatal(err)
	}
	return st
}
