package daemon

import (
	"os"
	"testing"
)

// A daemon that restarts one host's share of a world after the hosts
// dealt the units, and plans other units now (a file landed in the input
// directory since; nothing pins a directory's listing), cannot deal them
// as the other hosts did: it must fail the job, saying why. It must not
// wait for counts that the trainers, past their exchange and attached,
// will never post again (its ranks, and with them every rank of the world
// in DDP, would then wait for ever), nor deal the new plan on its own.
// (TestRestoreEveryExchangedRecordFails restarts from every record the
// job is written with on the way.)
func TestRestartWithAnotherPlanFails(t *testing.T) {
	in := t.TempDir()
	copyInputs(t, in, "part-00000.parquet", "part-00001.parquet")
	state := t.TempDir()
	d := apiDaemon(t, func(c *Config) { c.StateDir = state })
	j, counts := exchangedJob(t, d, in)
	// and the counts in the job's record (persisted after they are known):
	// the daemon is killed after that.
	waitUntil(t, "the counts in the job's record", func() bool {
		recs, _ := d.store.load()
		for _, rec := range recs {
			if rec.ID == j.id && len(rec.UnitRows) == len(counts) {
				return true
			}
		}
		return false
	})
	// The daemon is killed now (its record as it is), and a file lands in
	// the input directory before it starts again.
	saved := t.TempDir()
	if err := os.CopyFS(saved, os.DirFS(state)); err != nil {
		t.Fatal(err)
	}
	copyInputs(t, in, "part-00002.parquet")
	d2 := apiDaemon(t, func(c *Config) { c.StateDir = saved })
	recs, errs := d2.store.load()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var again *Job
	for _, rec := range recs {
		if rec.ID == j.id {
			d2.restore(rec)
			again = d2.jobs[rec.ID]
		}
	}
	if again == nil {
		t.Fatal("the job was not restored")
	}
	defer cancelAndWait(t, again)
	wantFailsForPlan(t, again, len(counts))
}
