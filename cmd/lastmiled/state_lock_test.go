package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSecondDaemonSameState: a second lastmiled started with another
// socket (a debugging run with -socket, the default state_dir and shm_dir)
// used to start, load the first one's jobs, fail every running one in its
// own view ("ring in use ... belongs to a live producer") and, a grace
// period later, delete their records from the shared state_dir under the
// running daemon. The flock on state_dir/lock refuses it at start, with an
// error naming the directory and the holder's pid, before it reads any
// record; the lock dies with its process, so a restart after kill -9
// takes it again.
func TestSecondDaemonSameState(t *testing.T) {
	e := newEnv(t)
	e.start()
	j := e.submit(specFor("endless", smallData, "epochs: 0\n"), nil)
	e.waitJob(j.ID, 20*time.Second, "running")
	rec := filepath.Join(e.state, "jobs", j.ID+".json")
	if _, err := os.Stat(rec); err != nil {
		t.Fatalf("record of the running job: %v", err)
	}
	other := filepath.Join(e.dir, "other.sock")
	cmd := exec.Command(bin, "-config", filepath.Join(e.dir, "lastmiled.yaml"), "-socket", other, "-state-dir", e.state,
		"-shm-dir", e.shm, "-metrics", "off", "-grace", "1s", "-workers", "1")
	var log syncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.Env = childEnv("LASTMILE_SHM_DIR=" + e.shm)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("the refused second daemon exited 0")
		}
	case <-time.After(4 * time.Second):
		cmd.Process.Kill()
		<-done
		_, err := os.Stat(rec)
		t.Fatalf("a second lastmiled on the same state_dir and shm_dir (another socket) started and ran for 4s; record of the first daemon's running job: %v\nsecond daemon's log:\n%s",
			err, strings.TrimSpace(log.String()))
	}
	out := log.String()
	pid := fmt.Sprintf("pid %d", e.cur.cmd.Process.Pid)
	if !strings.Contains(out, e.state) || !strings.Contains(out, pid) {
		t.Errorf("the second daemon's error does not name the state directory %s and the holder's %s:\n%s", e.state, pid, out)
	}
	if strings.Contains(out, "job resumed") || strings.Contains(out, "job failed") {
		t.Errorf("the refused daemon touched the jobs before it was refused:\n%s", out)
	}
	if _, err := os.Stat(rec); err != nil {
		t.Errorf("record of the first daemon's running job: %v", err)
	}
	if _, err := os.Stat(other); err == nil {
		t.Errorf("the refused daemon left its socket %s", other)
	}
	// The lock goes with its process: a start after kill -9 takes it.
	e.kill9()
	e.start()
	e.waitJob(j.ID, 20*time.Second, "running")
}
