package asuser_test

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lastmile/lastmile/asuser"
)

// Test identities: numeric ids need no /etc/passwd entry for the kernel.
const (
	userUID  = 41001
	userGID  = 41001
	groupGID = 41002 // a supplementary group of the user in some cases
)

var user = asuser.Cred{UID: userUID, GID: userGID}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("switching file system credentials needs root (CAP_SETUID, CAP_SETGID); run the tests as root to cover it")
	}
}

// tree makes a directory tree under a world-searchable temporary
// directory and returns its root.
func tree(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, st.Mode().Perm()|0o011); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

func write(t *testing.T, path string, mode os.FileMode, uid, gid int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("secret"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
}

func TestOpenAsUser(t *testing.T) {
	needRoot(t)
	dir := tree(t)
	write(t, filepath.Join(dir, "public"), 0o644, 0, 0)
	write(t, filepath.Join(dir, "private"), 0o600, 0, 0)
	write(t, filepath.Join(dir, "mine"), 0o600, userUID, userGID)
	write(t, filepath.Join(dir, "group"), 0o640, 0, groupGID)
	write(t, filepath.Join(dir, "closed", "file"), 0o644, 0, 0)
	os.Chmod(filepath.Join(dir, "closed"), 0o700)
	os.Symlink(filepath.Join(dir, "private"), filepath.Join(dir, "link-private"))
	os.Symlink(filepath.Join(dir, "public"), filepath.Join(dir, "link-public"))
	syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o666)

	inGroup := asuser.Cred{UID: userUID, GID: userGID, Groups: []uint32{groupGID}}
	for _, c := range []struct {
		name string
		cred asuser.Cred
		path string
		want error // nil: opens
	}{
		{"world readable", user, "public", nil},
		{"owner only, another owner", user, "private", fs.ErrPermission},
		{"owner only, the user's own", user, "mine", nil},
		{"group readable, not a member", user, "group", fs.ErrPermission},
		{"group readable, supplementary member", inGroup, "group", nil},
		{"directory without search permission", user, "closed/file", fs.ErrPermission},
		{"readable symlink to an unreadable file", user, "link-private", fs.ErrPermission},
		{"symlink to a readable file", user, "link-public", nil},
		{"missing", user, "nothing", fs.ErrNotExist},
		{"a FIFO does not block and is refused", user, "fifo", asuser.ErrNotRegular},
		{"root reads anything", asuser.Cred{}, "private", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := asuser.FS{Cred: c.cred}.Open(filepath.Join(dir, c.path))
			if c.want == nil {
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				f.Close()
				return
			}
			if f != nil {
				f.Close()
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("open: got %v, want %v", err, c.want)
			}
		})
	}
}

// An ACL that denies the user wins over mode bits that would allow: the
// kernel decides, so ACLs need no code of lastmile's.
func TestOpenACL(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("setfacl"); err != nil {
		t.Skip("setfacl not installed (Debian's acl package); make test installs it")
	}
	dir := tree(t)
	path := filepath.Join(dir, "acl")
	write(t, path, 0o644, 0, 0)
	if out, err := exec.Command("setfacl", "-m", "u:41001:---", path).CombinedOutput(); err != nil {
		t.Skipf("setfacl on %s: %v: %s (file system without ACLs)", dir, err, out)
	}
	if _, err := (asuser.FS{Cred: user}).Open(path); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("open with a denying ACL: got %v, want permission denied", err)
	}
	other := asuser.Cred{UID: userUID + 1, GID: userGID}
	f, err := asuser.FS{Cred: other}.Open(path)
	if err != nil {
		t.Fatalf("another user, not named by the ACL: %v", err)
	}
	f.Close()
}

func TestStatAndReadDir(t *testing.T) {
	needRoot(t)
	dir := tree(t)
	write(t, filepath.Join(dir, "open", "a"), 0o644, 0, 0)
	write(t, filepath.Join(dir, "listless", "b"), 0o644, 0, 0)
	os.Chmod(filepath.Join(dir, "listless"), 0o711) // search, no read
	u := asuser.FS{Cred: user}
	if ents, err := u.ReadDir(filepath.Join(dir, "open")); err != nil || len(ents) != 1 {
		t.Fatalf("ReadDir open: %v %v", ents, err)
	}
	if _, err := u.ReadDir(filepath.Join(dir, "listless")); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("ReadDir without read permission: got %v", err)
	}
	if _, err := u.Stat(filepath.Join(dir, "listless", "b")); err != nil {
		t.Fatalf("Stat through a search-only directory: %v", err)
	}
}

// The daemon's own credentials are intact after, and during, any number
// of switches on other threads.
func TestCredentialsRestored(t *testing.T) {
	needRoot(t)
	dir := tree(t)
	private := filepath.Join(dir, "private")
	write(t, private, 0o600, 0, 0)
	u := asuser.FS{Cred: user}
	var wg sync.WaitGroup
	stop := time.Now().Add(300 * time.Millisecond)
	errs := make(chan error, 8)
	for range 4 {
		wg.Add(2)
		go func() { // as the user: always refused
			defer wg.Done()
			for time.Now().Before(stop) {
				if _, err := u.Open(private); !errors.Is(err, fs.ErrPermission) {
					errs <- err
					return
				}
			}
		}()
		go func() { // as the daemon, meanwhile: always allowed
			defer wg.Done()
			for time.Now().Before(stop) {
				f, err := os.Open(private)
				if err != nil {
					errs <- err
					return
				}
				f.Close()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("unexpected: %v", err)
	}
	if gs, _ := os.Getgroups(); len(gs) > 0 && gs[0] == groupGID {
		t.Errorf("the process's groups changed: %v", gs)
	}
}

func TestDoPanicRestores(t *testing.T) {
	needRoot(t)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic not passed on")
			}
		}()
		user.Do(func() error { panic("boom") })
	}()
	dir := tree(t)
	write(t, filepath.Join(dir, "p"), 0o600, 0, 0)
	for range 20 { // the threads the runtime reuses are the daemon's again
		f, err := os.Open(filepath.Join(dir, "p"))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

func BenchmarkOpen(b *testing.B) {
	path := filepath.Join(tree(b), "f")
	os.WriteFile(path, []byte("x"), 0o644)
	b.Run("os.Open", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
	b.Run("asuser", func(b *testing.B) {
		if os.Geteuid() != 0 {
			b.Skip("needs root")
		}
		u := asuser.FS{Cred: user}
		b.ReportAllocs()
		for b.Loop() {
			f, err := u.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
}

// A relative name would be resolved from the daemon's working directory,
// whose parents the kernel never checks for the user: every call refuses
// it, with ErrRelative, before switching credentials.
func TestRelativeNamesRefused(t *testing.T) {
	u := asuser.FS{Cred: user}
	for _, c := range []struct {
		name string
		call func(string) error
	}{
		{"Open", func(n string) error { _, err := u.Open(n); return err }},
		{"Stat", func(n string) error { _, err := u.Stat(n); return err }},
		{"ReadDir", func(n string) error { _, err := u.ReadDir(n); return err }},
	} {
		for _, name := range []string{"side.parquet", "./side.parquet", "../etc/passwd", "a/b"} {
			if err := c.call(name); !errors.Is(err, asuser.ErrRelative) {
				t.Errorf("%s(%q): %v, want ErrRelative", c.name, name, err)
			}
		}
	}
}
