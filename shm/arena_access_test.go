package shm_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lastmile/lastmile/shm"
)

// A trainer whose ring is its own but whose arena is not (lastmiled could
// not chown it) is told so, and what to look at, not that the arena may
// not be a symbolic link.
func TestArenaTheUserMayNotOpen(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to attach as uid 65534")
	}
	dir, err := os.MkdirTemp("", "lastmile-access-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	a, err := shm.CreateArena(shm.ArenaConfig{Dir: dir, Size: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Remove()
	p, err := shm.Create(shm.Config{Dir: dir, Name: "r", Slots: 2, SlotSize: 8192, Fields: testFields, Arena: a})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Chown(65534, 65534); err != nil { // the ring given, the arena not
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "helper") // executable by uid 65534
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestHelperProcess$", "-test.v=false")
	cmd.Env = childEnv(helperEnv+"=open", "H_DIR="+dir, "H_NAME=r")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "may not open for reading and writing") || !strings.Contains(string(out), "CAP_CHOWN") {
		t.Errorf("as uid 65534: %s", out)
	}
}
