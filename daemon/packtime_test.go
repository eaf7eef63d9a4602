package daemon

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

// TestPackTimeNeverGoesBack: lastmile_stage_seconds_total{stage="pack"}
// is a counter, so the job's pack time must never decrease. While the
// producer sleeps on a full ring, that wait (under way) was subtracted
// from a pack time that did not include it yet: the counter fell, to 0,
// for as long as the trainer kept the ring full (Prometheus reads a
// counter that falls as a reset).
func TestPackTimeNeverGoesBack(t *testing.T) {
	dir := t.TempDir()
	abs, _ := filepath.Abs("../testdata/small")
	job, err := spec.Parse("test.yaml", []byte("version: 1\nname: packtime\ninputs: ["+abs+"]\ncolumns: [row_id]\n"+
		"batch: {size: 100, last: keep}\nring: {dir: "+dir+", slots: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	prog := new(engine.Progress)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		engine.Run(ctx, job, engine.Options{Progress: prog})
	}()
	var last, peak time.Duration
	var sawWait bool
	for end := time.Now().Add(700 * time.Millisecond); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		var tot progressTotals
		tot.add(prog)
		if tot.pack < last {
			t.Fatalf("pack time went back from %v to %v (a counter)", last, tot.pack)
		}
		last = max(last, tot.pack)
		peak = max(peak, tot.pack)
		for _, st := range prog.RingStats() {
			if st.FullWait > 0 {
				sawWait = true
			}
		}
	}
	if !sawWait {
		t.Fatal("the producer never waited on its full ring: the test measures nothing")
	}
	if peak == 0 {
		t.Error("pack time 0 after packing two batches")
	}
	cancel()
	<-done
}
