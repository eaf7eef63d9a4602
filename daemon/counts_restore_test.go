package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// copyInputs copies the named files of testdata/small into dir.
func copyInputs(t *testing.T, dir string, files ...string) {
	t.Helper()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("../testdata/small", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// exchangedJob runs on d a job that counts its share of in's units (host
// 0 of 2), posts every unit's true counts as its trainers would, and
// waits for them to be known. It returns the job and the counts.
func exchangedJob(t *testing.T, d *Daemon, in string) (*Job, []int64) {
	t.Helper()
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
	cancelAndWait(t, probe)
	// The job: it counts its share, and its trainers post every count.
	j, _, err := d.submit(context.Background(), p, submitRequest{Spec: spec("hx"), Hosts: 2, Host: 0, ShareCounts: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancelAndWait(t, j) })
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
	return j, counts
}

// cancelAndWait cancels j and waits for its supervisor to return, its
// record written: the test's directories may go.
func cancelAndWait(t *testing.T, j *Job) {
	t.Helper()
	j.cancel("test over")
	select {
	case <-j.finishedCh():
	case <-time.After(30 * time.Second):
		t.Errorf("job %s still supervised 30s after its cancel", j.id)
	}
}

// wantFailsForPlan waits for the restarted job again to fail, saying
// the plan changed; it fails t where the job deals a plan of other than
// units units on its own, or is still waiting 20s on.
func wantFailsForPlan(t *testing.T, again *Job, units int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		again.mu.Lock()
		st, msg, rows := again.state, again.errMsg, slices.Clone(again.unitRows)
		again.mu.Unlock()
		if st == Failed {
			if !strings.Contains(msg, "plan") {
				t.Fatalf("the restarted job failed: %s; want it to say the plan changed", msg)
			}
			return
		}
		if len(rows) != units && len(rows) > 0 {
			t.Fatalf("the restarted host dealt a new plan of %d units on its own (the other hosts dealt %d)", len(rows), units)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the restarted job is %s, counts %q 20s on: it waits for counts the trainers will not post again", again.state, again.countsState())
}

// Every record a job of share_counts is written with once its trainers
// posted their counts (a daemon may be killed after any of them) makes a
// restarted daemon that plans other units fail the job: the trainers are
// past their exchange and will not post again. The record holds the list
// they posted until a run deals by it, and then says it dealt.
func TestRestoreEveryExchangedRecordFails(t *testing.T) {
	in := t.TempDir()
	copyInputs(t, in, "part-00000.parquet", "part-00001.parquet")
	d := apiDaemon(t, func(c *Config) { c.StateDir = t.TempDir() })
	var mu sync.Mutex
	var written []*record
	d.store.mu.Lock()
	d.store.wrote = func(data []byte) {
		rec := new(record)
		if err := json.Unmarshal(data, rec); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		written = append(written, rec)
		mu.Unlock()
	}
	d.store.mu.Unlock()
	j, counts := exchangedJob(t, d, in)
	var dealt *record
	waitUntil(t, "the deal in the job's record", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, rec := range written {
			if rec.ID == j.id && rec.UnitRowsDealt {
				dealt = rec
			}
		}
		return dealt != nil
	})
	if !slices.Equal(dealt.UnitRows, counts) || len(dealt.SharedRows) > 0 {
		t.Fatalf("the dealt record holds unit rows %v and a posted list %v: want the posted counts %v, once", dealt.UnitRows, dealt.SharedRows, counts)
	}
	// The job's records since the counts were posted, each state once;
	// and the one postCounts writes (exchangedJob posts without it).
	posted := *dealt
	posted.SharedRows, posted.SharedPlan, posted.UnitRows, posted.UnitRowsPlan, posted.UnitRowsDealt = counts, dealt.UnitRowsPlan, nil, "", false
	states := map[string]*record{"posted": &posted}
	mu.Lock()
	for _, rec := range written {
		if rec.ID == j.id && (len(rec.SharedRows) > 0 || len(rec.UnitRows) > 0) {
			states[fmt.Sprintf("written: unit_rows %d, dealt %v, shared_rows %d, alone %v",
				len(rec.UnitRows), rec.UnitRowsDealt, len(rec.SharedRows), rec.CountAlone)] = rec
		}
	}
	mu.Unlock()
	copyInputs(t, in, "part-00002.parquet") // the input changes before the restart
	for _, name := range slices.Sorted(maps.Keys(states)) {
		rec := states[name]
		t.Run(name, func(t *testing.T) {
			rec.State = string(Running)
			d2 := apiDaemon(t, func(c *Config) { c.StateDir = t.TempDir() })
			if err := d2.store.put(rec); err != nil {
				t.Fatal(err)
			}
			d2.restore(rec)
			again := d2.jobs[rec.ID]
			if again == nil {
				t.Fatal("the job was not restored")
			}
			defer cancelAndWait(t, again)
			wantFailsForPlan(t, again, len(counts))
		})
	}
}
