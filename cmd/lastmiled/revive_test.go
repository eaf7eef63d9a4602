package main_test

import (
	"context"
	"slices"
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
	j := e.submit(specText, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	other := &reader{e: e, job: j.ID, rank: 1} // reads rank 1 to the end
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
