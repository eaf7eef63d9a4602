package main_test

import (
	"path/filepath"
	"testing"
	"time"
)

// TestFailedJobMemory: a failed job's rings are removed, and from then
// on it is no charge against the budget: lastmile_job_memory_bytes is 0 and
// GET /v1/status memory.reserved leaves it out (chargedLocked, holdsRings).
// But GET /v1/jobs/{id} memory_bytes, documented as "the job's charge
// against the memory budget" (docs/control-api.md), is the footprint
// regardless (daemon/api.go view: Memory: j.footprint), and so is the
// MEMORY column of `lastmile jobs` and the memory line of `lastmile status
// JOB`: an operator adding up that column gets more than is reserved.
func TestFailedJobMemory(t *testing.T) {
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
