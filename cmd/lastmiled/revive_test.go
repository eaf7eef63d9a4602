package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/shm"
)

// TestResumeAfterDone: a trainer rank dies in its job's last ring-full,
// after production has published every batch (the job is done, its ring
// still in place), and restarts from an older checkpoint. Submitting the
// same spec joins the done job; attaching with the checkpoint's cursor
// must bring production back for that rank, with the same batches as the
// first time, instead of refusing until the done job is forgotten.
func TestResumeAfterDone(t *testing.T) {
	e := newEnv(t)
	e.start()
	specText := specFor("rd", smallData, "world_size: 2\n")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	j, first, curs, other := doneWithTail(ctx, t, e, specText)

	// The restarted trainer submits again (it joins the done job) and
	// attaches with its checkpoint, batch 40.
	if again := e.submit(specText, nil); again.ID != j.ID {
		t.Fatalf("submitting the same spec again made job %s, want the done job %s joined", again.ID, j.ID)
	}
	r0 := &reader{e: e, job: j.ID, rank: 0}
	r0.rows = flat(first[:40])
	r0.cursors = slices.Clone(curs[:40])
	if err := r0.run(ctx); err != nil {
		t.Fatalf("rank 0 resuming at batch 40 of a done job: %v", err)
	}
	if !r0.restarted {
		t.Errorf("rank 0 read on without a restart of production")
	}
	if len(r0.cursors) != 50 {
		t.Fatalf("rank 0 read %d batches in all, want 50", len(r0.cursors))
	}
	for i, c := range r0.cursors {
		if c.BatchIndex != uint64(i) || c.Epoch != 0 {
			t.Fatalf("rank 0 batch %d has cursor %+v", i, c)
		}
	}
	// The batches made again are the ones the first trainer read.
	again := r0.rows[len(flat(first[:40])):]
	if !slices.Equal(again[:len(flat(first[40:]))], flat(first[40:])) {
		t.Errorf("batches 40-47 made again differ from the first time")
	}
	checkExactlyOnce(t, "epoch read across a done job's revival", append(r0.rows, other.rows...), 10000)
	if r0.cursors[49].Flags&shm.FlagLastInEpoch == 0 {
		t.Errorf("rank 0's last batch is not marked last: %+v", r0.cursors[49])
	}
	e.waitJob(j.ID, 20*time.Second, "done")
}

// doneWithTail submits a two-rank job, reads rank 1 to its end and has a
// trainer process read rank 0's batches 0 to 47 and be killed holding
// 47, so that the job ends done with batches left in rank 0's ring. It
// returns the job, what the trainer read, and rank 1's reader.
func doneWithTail(ctx context.Context, t *testing.T, e *env, specText string) (jobJSON, [][]int64, []shm.Cursor, *reader) {
	t.Helper()
	j := e.submit(specText, nil)
	other := &reader{e: e, job: j.ID, rank: 1}
	otherErr := make(chan error, 1)
	go func() { otherErr <- other.run(ctx) }()
	var a attachJSON
	if st, err := e.do("POST", "/v1/jobs/"+j.ID+"/attach", map[string]any{"rank": 0}, &a); err != nil || st != 200 {
		t.Fatalf("attach: %d %v", st, err)
	}
	first, curs := runTrainer(t, a, 48) // batches 0..47, then killed
	if curs[47].BatchIndex != 47 {
		t.Fatalf("trainer read %+v", curs[47])
	}
	if err := <-otherErr; err != nil {
		t.Fatal(err)
	}
	e.waitJob(j.ID, 20*time.Second, "done")
	return j, first, curs, other
}

// TestResumeAfterDoneAcrossRestart: as TestResumeAfterDone, but lastmiled
// restarts while the job is done (its rings still in place). A restored
// done job has no ring observers (restore opens none for a terminal job),
// so revive takes every other rank's resume cursor from ranks[k].Start,
// the cursor its ring was created at (batch 0 here), instead of where its
// consumer stands (the end of the epoch): production for rank 1 starts
// the epoch over into a ring nobody reads.
func TestResumeAfterDoneAcrossRestart(t *testing.T) {
	e := newEnv(t)
	e.start()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	j, first, curs, other := doneWithTail(ctx, t, e, specFor("rdr", smallData, "world_size: 2\n"))

	// lastmiled restarts while the job is done (and recorded done).
	waitRecordDone(t, e, j.ID)
	e.kill9()
	e.start()
	e.waitJob(j.ID, 5*time.Second, "done")

	r0 := &reader{e: e, job: j.ID, rank: 0}
	r0.rows = flat(first[:40])
	r0.cursors = slices.Clone(curs[:40])
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	if err := r0.run(rctx); err != nil {
		t.Fatalf("rank 0 resuming at batch 40 of a done job restored after a restart: %v", err)
	}
	if len(r0.cursors) != 50 {
		t.Fatalf("rank 0 read %d batches in all, want 50", len(r0.cursors))
	}
	checkExactlyOnce(t, "epoch read across a restart and a done job's revival", append(r0.rows, other.rows...), 10000)
	// Rank 1 had read its whole epoch: its revived ring must not be
	// produced again from the epoch's start.
	got := e.job(j.ID)
	for _, rg := range got.Rings {
		if rg.Rank == 1 && rg.Next != nil && (rg.Next.Epoch == 0) {
			t.Errorf("rank 1's revived ring starts at %+v (head %d, tail %d): the epoch is produced again for a rank that read it all", *rg.Next, rg.Head, rg.Tail)
		}
	}
	e.waitJob(j.ID, 20*time.Second, "done")
}

// TestResumeAfterDoneArena: a done job with a unit arena (ring.arena)
// revived by a trainer's older cursor: once every rank read to the end and
// the job is done again, the shm directory empties (rings and every arena
// removed) and no arena removal fails.
func TestResumeAfterDoneArena(t *testing.T) {
	e := newEnv(t)
	e.start("-grace", "3s")
	specText := fmt.Sprintf("name: rda\ninputs: [%s]\ncolumns: [row_id]\nbatch: {size: 100}\nworld_size: 2\nring: {slots: 4, arena: true}\n", smallData)
	j := e.submit(specText, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	other := &reader{e: e, job: j.ID, rank: 1}
	otherErr := make(chan error, 1)
	go func() { otherErr <- other.run(ctx) }()
	var a attachJSON
	if st, err := e.do("POST", "/v1/jobs/"+j.ID+"/attach", map[string]any{"rank": 0}, &a); err != nil || st != 200 {
		t.Fatalf("attach: %d %v", st, err)
	}
	first, curs := runTrainer(t, a, 48)
	if err := <-otherErr; err != nil {
		t.Fatal(err)
	}
	e.waitJob(j.ID, 20*time.Second, "done")
	arenas := func() []string { m, _ := filepath.Glob(filepath.Join(e.shm, "arena+*")); return m }
	t.Logf("arenas before the revival: %v", arenas())
	r0 := &reader{e: e, job: j.ID, rank: 0}
	r0.rows = flat(first[:40])
	r0.cursors = slices.Clone(curs[:40])
	if err := r0.run(ctx); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, "epoch", append(r0.rows, other.rows...), 10000)
	e.waitJob(j.ID, 20*time.Second, "done")
	t.Logf("arenas after: %v", arenas())
	e.waitShmEmpty("nothing in shm once the revived job is done and drained", 20*time.Second)
	time.Sleep(300 * time.Millisecond)
	if s := e.log.String(); strings.Contains(s, "remove unit arena") || strings.Contains(s, "remove the arena") {
		t.Errorf("the daemon warned removing an arena:\n%s", grepLines(s, "arena"))
	}
}

// TestResumeAfterDoneWholeWorld: both ranks die in the job's last
// ring-full and the restarted world attaches at once with the same older
// checkpoint: each rank reads on from it, every row once.
func TestResumeAfterDoneWholeWorld(t *testing.T) {
	e := newEnv(t)
	e.start()
	j := e.submit(specFor("rdw", smallData, "world_size: 2\n"), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var firsts [2][][]int64
	var cursors [2][]shm.Cursor
	done := make(chan struct{}, 2)
	for r := range 2 {
		var a attachJSON
		if st, err := e.do("POST", "/v1/jobs/"+j.ID+"/attach", map[string]any{"rank": r}, &a); err != nil || st != 200 {
			t.Fatalf("attach: %d %v", st, err)
		}
		go func() { firsts[r], cursors[r] = runTrainer(t, a, 48); done <- struct{}{} }()
	}
	<-done
	<-done
	e.waitJob(j.ID, 20*time.Second, "done")
	readers := make([]*reader, 2)
	for r := range 2 {
		readers[r] = &reader{e: e, job: j.ID, rank: r, rows: flat(firsts[r][:40]), cursors: slices.Clone(cursors[r][:40])}
	}
	if err := startReaders(ctx, readers)(); err != nil {
		t.Fatal(err)
	}
	var all []int64
	for r, rd := range readers {
		if len(rd.cursors) != 50 {
			t.Errorf("rank %d read %d batches, want 50", r, len(rd.cursors))
		}
		for i, c := range rd.cursors {
			if c.BatchIndex != uint64(i) || c.Epoch != 0 {
				t.Fatalf("rank %d batch %d has cursor %+v", r, i, c)
			}
		}
		all = append(all, rd.rows...)
	}
	checkExactlyOnce(t, "the world resumed after done", all, 10000)
	e.waitJob(j.ID, 20*time.Second, "done")
}

// TestResumeAfterDoneThenKill9: lastmiled is killed while a revived done
// job produces again; the next lastmiled restores the revived job and the
// rank reads on to the end, every row once.
func TestResumeAfterDoneThenKill9(t *testing.T) {
	e := newEnv(t)
	e.start()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	j, first, curs, other := doneWithTail(ctx, t, e, specFor("rdk", smallData, "world_size: 2\n"))
	r0 := &reader{e: e, job: j.ID, rank: 0, delay: 50 * time.Millisecond}
	r0.rows = flat(first[:40])
	r0.cursors = slices.Clone(curs[:40])
	wait := startReaders(ctx, []*reader{r0})
	waitFor(t, "rank 0 reading the revived run", 20*time.Second, func() bool { return r0.count() >= 42 })
	e.kill9()
	time.Sleep(300 * time.Millisecond)
	e.start()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if len(r0.cursors) != 50 {
		t.Fatalf("rank 0 read %d batches in all, want 50", len(r0.cursors))
	}
	checkExactlyOnce(t, "epoch read across a revival and a kill -9", append(r0.rows, other.rows...), 10000)
	e.waitJob(j.ID, 20*time.Second, "done")
}

// TestReviveOverMemoryBudget: a done job restored after a restart of
// lastmiled is charged nothing against memory.total (its footprint is not
// persisted and a terminal job's supervisor, which estimates it again,
// does not run), so another job is admitted in its place; reviving the
// done job then runs both, over the budget, with no admission check.
func TestReviveOverMemoryBudget(t *testing.T) {
	e := newEnv(t)
	flags := []string{"-memory-per-job", "3MiB", "-memory-total", "3MiB"}
	e.start(flags...)
	a := e.submit(specFor("ma", smallData, ""), nil)
	var at attachJSON
	if st, err := e.do("POST", "/v1/jobs/"+a.ID+"/attach", map[string]any{"rank": 0}, &at); err != nil || st != 200 {
		t.Fatalf("attach: %d %v", st, err)
	}
	_, curs := runTrainer(t, at, 98) // of 100 batches
	e.waitJob(a.ID, 20*time.Second, "done")
	charged := e.job(a.ID).Memory
	t.Logf("done job charged %d bytes", charged)

	waitRecordDone(t, e, a.ID)
	e.kill9()
	e.start(flags...)
	t.Logf("after the restart the done job is charged %d bytes", e.job(a.ID).Memory)
	var ej errJSON
	var b jobJSON
	st, _ := e.do("POST", "/v1/jobs", map[string]any{"spec": specFor("mb", smallData, "")}, &b)
	if st != 201 && st != 200 {
		t.Logf("second job refused (%d): the budget holds", st)
		return
	}
	// The done job's trainer resumes from an older checkpoint.
	next := cursor{Epoch: 0, Batch: curs[90].BatchIndex}
	st, err := e.do("POST", "/v1/jobs/"+a.ID+"/attach", map[string]any{"rank": 0, "cursor": next}, &ej)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both charged", 10*time.Second, func() bool { return e.job(a.ID).Memory > 0 || st != 200 })
	ja, jb := e.job(a.ID), e.job(b.ID)
	if st == 200 && ja.Memory+jb.Memory > 3<<20 {
		t.Errorf("revived job %s (%d bytes) and job %s (%d bytes) together hold %d bytes, over memory.total 3MiB", ja.State, ja.Memory, jb.State, jb.Memory, ja.Memory+jb.Memory)
	}
}

// waitRecordDone waits until the job's persisted record says done (the
// API shows done a moment before finish persists it).
func waitRecordDone(t *testing.T, e *env, id string) {
	t.Helper()
	waitFor(t, "the done state persisted", 10*time.Second, func() bool {
		b, err := os.ReadFile(filepath.Join(e.state, "jobs", id+".json"))
		return err == nil && strings.Contains(string(b), `"state": "done"`)
	})
}

// TestSubmitAfterDrained: a job that is done and whose every ring was read
// to its end is over, even in the second before the monitor removes its
// rings. A Dataset made again on the same spec at once (an evaluation loop
// that builds its Dataset each pass) joined it, attached where its ring
// stood, at the end, and got no batch, silently. A submission now retires
// such a job and makes a new one.
func TestSubmitAfterDrained(t *testing.T) {
	e := newEnv(t)
	e.start()
	specText := specFor("again", smallData, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ids []string
	for pass := range 3 {
		j := e.submit(specText, nil)
		ids = append(ids, j.ID)
		r := &reader{e: e, job: j.ID}
		if err := r.run(ctx); err != nil {
			t.Fatal(err)
		}
		if len(r.cursors) != 100 || r.cursors[0].BatchIndex != 0 {
			t.Fatalf("pass %d (job %s): %d batches from %v, want all 100 of the epoch", pass, j.ID, len(r.cursors), r.cursors)
		}
		checkExactlyOnce(t, fmt.Sprintf("pass %d", pass), r.rows, 10000)
		e.waitJob(j.ID, 10*time.Second, "done")
	}
	if ids[0] == ids[1] || ids[1] == ids[2] {
		t.Errorf("jobs %v: a drained done job was joined", ids)
	}
}

// TestPastEndCancels: a job whose every rank's trainer asks for a batch
// past its last epoch produces for nobody: it is canceled, saying why,
// once the last rank has asked, and not before.
func TestPastEndCancels(t *testing.T) {
	e := newEnv(t)
	e.start()
	j := e.submit(specFor("pe", smallData, "world_size: 2\nepochs: 2\n"), nil)
	past := map[string]any{"cursor": cursor{2, 0}}
	for r := range 2 {
		past["rank"] = r
		if st, err := e.do("POST", "/v1/jobs/"+j.ID+"/attach", past, nil); err != nil || st != 400 {
			t.Fatalf("rank %d attach past the end: %d %v, want 400", r, st, err)
		}
		if r == 0 {
			if got := e.job(j.ID); got.State != "running" && got.State != "pending" {
				t.Fatalf("one rank of two past the end: job %s (%s), want it running", got.State, got.Error)
			}
		}
	}
	got := e.waitJob(j.ID, 10*time.Second, "canceled")
	if !strings.Contains(got.Error, "past the job's last epoch") {
		t.Errorf("canceled job's error %q does not say why", got.Error)
	}
}
