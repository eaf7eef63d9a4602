package daemon

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// A daemon that restarts one host's share of a world after the hosts
// dealt the units, and plans other units now (a file landed in the input
// directory since; nothing pins a directory's listing), cannot deal them
// as the other hosts did: it must fail the job, saying why. It must not
// wait for counts that the trainers, past their exchange and attached,
// will never post again (its ranks, and with them every rank of the world
// in DDP, would then wait for ever), nor deal the new plan on its own.
func TestRestartWithAnotherPlanFails(t *testing.T) {
	in := t.TempDir()
	for _, f := range []string{"part-00000.parquet", "part-00001.parquet"} {
		b, err := os.ReadFile(filepath.Join("../testdata/small", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(in, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	state := t.TempDir()
	d := apiDaemon(t, func(c *Config) { c.StateDir = state })
	p := peer{uid: uint32(os.Getuid()), gid: uint32(os.Getgid()), ok: true}
	spec := func(name string) string {
		return "name: " + name + "\ninputs: [" + in + "]\nworld_size: 4\nbatch: {size: 100}\nring: {slots: 4}\n" +
			"pipeline:\n  - filter: \"row_id % 4 != 3\"\n"
	}
	// The true counts, from a job that counts every unit itself.
	probe, _, err := d.submit(context.Background(), p, submitRequest{Spec: spec("probe"), Hosts: 2, Host: 0})
	if err != nil {
		t.Fatal(err)
	}
	var counts []int64
	waitUntil(t, "the probe's counts", func() bool {
		probe.mu.Lock()
		defer probe.mu.Unlock()
		counts = probe.unitRows
		return len(counts) > 0
	})
	probe.cancel("test")
	// The job: it counts its share, and its trainers post every count.
	j, _, err := d.submit(context.Background(), p, submitRequest{Spec: spec("hx"), Hosts: 2, Host: 0, ShareCounts: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.cancel("test over")
	var plan string
	waitUntil(t, "the share counted", func() bool {
		j.exchange.mu.Lock()
		defer j.exchange.mu.Unlock()
		if j.exchange.share != nil {
			plan = j.exchange.share.Plan
		}
		return plan != ""
	})
	if err := j.exchange.post(plan, counts, 2); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the units dealt", func() bool { return j.countsState() == "known" })
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
	b, _ := os.ReadFile(filepath.Join("../testdata/small", "part-00002.parquet"))
	if err := os.WriteFile(filepath.Join(in, "part-00002.parquet"), b, 0o644); err != nil {
		t.Fatal(err)
	}
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
	defer again.cancel("test over")
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		again.mu.Lock()
		st, msg := again.state, again.errMsg
		again.mu.Unlock()
		if st == Failed {
			if !strings.Contains(msg, "plan") {
				t.Fatalf("the restarted job failed: %s; want it to say the plan changed", msg)
			}
			return
		}
		again.mu.Lock()
		rows := slices.Clone(again.unitRows)
		again.mu.Unlock()
		if len(rows) != len(counts) && len(rows) > 0 {
			t.Fatalf("the restarted host dealt a new plan of %d units on its own (the other hosts dealt %d)", len(rows), len(counts))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the restarted job is %s, counts %q 20s on: it waits for counts the trainers will not post again", again.state, again.countsState())
}
