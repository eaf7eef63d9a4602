package chaos_test

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// shmFullRun gives the daemon a small tmpfs as its shm directory, fills it,
// and submits a job: its ranks must fail with an error saying that space
// ran out, within a bound (not hang). Then the space is freed and a new
// job on the same daemon must complete exactly, though the directory fills
// up again and the daemon is killed and restarted while it runs.
func shmFullRun(t *testing.T, c *tally, seed uint64) {
	if os.Geteuid() != 0 {
		t.Skip("shm-full: not root, cannot mount a tmpfs; skipped")
	}
	shm := filepath.Join(workDir(t, "chaos-shm"), "shm")
	os.MkdirAll(shm, 0o755)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "lastmile-chaos", shm).CombinedOutput(); err != nil {
		t.Skipf("shm-full: mount tmpfs: %v %s; skipped", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", shm).Run() })
	filler := filepath.Join(shm, "filler")
	if err := fill(filler); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, shm)
	data := sharedData(t)
	rng := rand.New(rand.NewPCG(seed, 0x73686d))
	j := newJob(t, d, rng, seed, data, time.Second, 1)
	c.count(&c.shmFull)
	if !j.wait(2 * time.Minute) {
		return
	}
	for _, tr := range j.trainers {
		e, _ := tr.end()
		switch {
		case e.OK:
			j.fail("rank %d completed with a full shm directory", tr.rank)
			return
		case !strings.Contains(e.Error, "no space left"):
			j.fail("rank %d: unclear error for a full shm directory: %s", tr.rank, e.Error)
			return
		}
		t.Logf("rank %d: %s", tr.rank, e.Error)
	}
	c.count(&c.errors)
	os.Remove(filler)
	refillAndRestart(t, c, d, newJob(t, d, rng, seed+1_000_000, data, 2*time.Second, 1), filler)
}

// refillAndRestart fills the shm directory again while job j runs, and
// kills and restarts the daemon: adopting its rings needs no new space, so
// the job must complete exactly.
func refillAndRestart(t *testing.T, c *tally, d *daemon, j *job, filler string) {
	waitRecorded(j, 3)
	if err := fill(filler); err != nil {
		t.Fatal(err)
	}
	t.Logf("fault: shm-full again after %d batches recorded, then kill9-daemon", j.recordedBatches())
	d.kill9()
	d.start()
	c.count(&c.shmFull)
	c.count(&c.kill9d)
	if !j.wait(2 * time.Minute) {
		return
	}
	for _, tr := range j.trainers {
		if e, _ := tr.end(); !e.OK {
			j.fail("rank %d failed after a restart on a full shm directory: %s", tr.rank, e.Error)
			return
		}
	}
	j.check(c, true)
	c.count(&c.runs)
}

// fill writes path until the file system is full.
func fill(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			return nil // ENOSPC: full
		}
	}
}
