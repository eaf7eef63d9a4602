package daemon

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/lastmile/lastmile/asuser"
)

// TestPeerNeedsToSwitchUsers: a peer opens each unit's files as its job's
// user, so a daemon that may not take another user's credentials (no
// CAP_SETUID and CAP_SETGID) refuses to serve as a peer, saying what it
// lacks, rather than failing every unit of every non-root user.
func TestPeerNeedsToSwitchUsers(t *testing.T) {
	if os.Getenv("LASTMILE_TEST_UNPRIVILEGED") != "" {
		// As uid 990 without capabilities (the child below).
		if err := peerCanReadAsUsers(); !errors.Is(err, asuser.ErrNoPrivilege) {
			t.Fatalf("without CAP_SETUID: %v, want ErrNoPrivilege", err)
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the check as another uid")
	}
	if err := peerCanReadAsUsers(); err != nil {
		t.Fatalf("as root: %v", err)
	}
	// The test binary may lie in a directory only root may search: copy it.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755) // t.TempDir's parent is 0700
	os.Chmod(dir, 0o755)
	for d := filepath.Dir(dir); d != "/"; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is not searchable by other users", d)
		}
	}
	bin := filepath.Join(dir, "daemon.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestPeerNeedsToSwitchUsers$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LASTMILE_TEST_UNPRIVILEGED=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 990, Gid: 990, Groups: []uint32{}}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("as uid 990: %v\n%s", err, out)
	}
}
