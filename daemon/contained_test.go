package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPidfdNSDepth: a pidfd's fdinfo gives the depth of a process's pid
// namespaces without its /proc entry (hidden from a daemon that is not
// root under ProtectProc=invisible), and refuses one that has exited.
func TestPidfdNSDepth(t *testing.T) {
	own, err := ownDepth()
	if err != nil {
		t.Fatal(err)
	}
	depth := func(pid int) (int, error) {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatalf("pidfd_open %d: %v", pid, err)
		}
		defer unix.Close(fd)
		return pidNSDepth(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	}
	if d, err := depth(os.Getpid()); err != nil || d != own {
		t.Errorf("this process: depth %d, %v; want %d", d, err, own)
	}
	// A process that has exited: its pidfd says Pid -1.
	done := exec.Command("true")
	if err := done.Start(); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.PidfdOpen(done.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	done.Wait()
	if d, err := pidNSDepth(fmt.Sprintf("/proc/self/fdinfo/%d", fd)); err == nil {
		t.Errorf("an exited process: depth %d, want an error", d)
	}
	if os.Geteuid() != 0 {
		t.Skip("a pid namespace of its own needs root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1)")
	}
	// A process in a pid namespace of its own (a container's).
	child := exec.Command("unshare", "--pid", "--fork", "sleep", "5")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for {
		// unshare forks sleep, which is the one in the new namespace.
		out, _ := exec.Command("pgrep", "-P", fmt.Sprint(child.Process.Pid)).Output()
		var pid int
		if _, err := fmt.Sscan(string(out), &pid); err == nil {
			if d, err := depth(pid); err != nil || d != own+1 {
				t.Errorf("a process in a pid namespace of its own: depth %d, %v; want %d", d, err, own+1)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("unshare's child did not appear")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
