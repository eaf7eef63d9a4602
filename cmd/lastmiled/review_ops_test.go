package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReviewFailedJobMemory: a failed job's rings are removed, and from then
// on it is no charge against the budget: lastmile_job_memory_bytes is 0 and
// GET /v1/status memory.reserved leaves it out (chargedLocked, holdsRings).
// But GET /v1/jobs/{id} memory_bytes, documented as "the job's charge
// against the memory budget" (docs/control-api.md), is the footprint
// regardless (daemon/api.go view: Memory: j.footprint), and so is the
// MEMORY column of `lastmile jobs` and the memory line of `lastmile status
// JOB`: an operator adding up that column gets more than is reserved.
func TestReviewFailedJobMemory(t *testing.T) {
	e := newEnv(t)
	e.start()
	bad, _ := filepath.Abs("../../testdata/corrupt/badpage.parquet")
	c := e.submit(badSpec("c", bad), nil)
	e.waitJob(c.ID, 20*time.Second, "failed")
	e.waitShmEmpty("the failed job's ring removed", 20*time.Second)
	var st struct {
		Memory struct{ Reserved int64 }
	}
	if code, err := e.do("GET", "/v1/status", nil, &st); code != 200 || err != nil {
		t.Fatalf("status: %d %v", code, err)
	}
	j := e.job(c.ID)
	if st.Memory.Reserved != 0 {
		t.Fatalf("memory.reserved %d with only a failed job whose rings are gone", st.Memory.Reserved)
	}
	if j.Memory != 0 {
		t.Errorf("failed job with its rings removed: memory_bytes %d, but memory.reserved is 0 and lastmile_job_memory_bytes is 0", j.Memory)
	}
}

// TestReviewSecondDaemonSameState: docs/daemon.md ("Limits") says two
// daemons on one shm_dir are refused ("the socket is checked and a ring
// with a live producer is never taken"). Only the socket is checked: a
// second lastmiled started with another socket (a debugging run with
// -socket, the default state_dir and shm_dir) starts, loads the first
// one's jobs, fails every running one in its own view ("ring in use ...
// belongs to a live producer") and, a grace period later, "forgets" them:
// it deletes their records from the shared state_dir under the running
// daemon. Checked with the binary: state/jobs/ was empty while the first
// daemon still ran the job, until its next periodic write; a crash of the
// first daemon in that window loses the job. A lock on state_dir (flock
// of state_dir/lock at start) would refuse the second daemon.
func TestReviewSecondDaemonSameState(t *testing.T) {
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
	defer func() {
		cmd.Process.Kill()
		<-done
	}()
	select {
	case <-done:
		return // refused: what the docs promise
	case <-time.After(4 * time.Second):
	}
	_, err := os.Stat(rec)
	t.Errorf("a second lastmiled on the same state_dir and shm_dir (another socket) started and ran for 4s; record of the first daemon's running job: %v\nsecond daemon's log:\n%s",
		err, strings.TrimSpace(log.String()))
}

// TestReviewRefusalsLogged: the daemon logs nothing when it refuses a
// submission or an attach. A user's job refused with 503 because
// memory.total is used up (or 429 at a per-user limit, 400 over
// memory.per_job, 409 because a rank already has a consumer) leaves no
// line in journald and no metric: the operator asked "why does alice's
// job not start" has only the user's client output to go on, and cannot
// see that the host's budget is turning jobs away.
func TestReviewRefusalsLogged(t *testing.T) {
	e := newEnv(t)
	e.start("-memory-total", "3MiB")
	e.submit(specFor("first", smallData, "epochs: 0\n"), nil)
	var ej errJSON
	st, err := e.do("POST", "/v1/jobs", map[string]any{"spec": specFor("second", smallData, "epochs: 0\n")}, &ej)
	if err != nil || st != 503 {
		t.Fatalf("second job: %d %v %s; want 503 (memory.total)", st, err, ej.Error)
	}
	time.Sleep(500 * time.Millisecond)
	if !strings.Contains(e.log.String(), "second") {
		t.Errorf("a submission refused with 503 (%s) left no line in the daemon's log", ej.Error)
	}
}
