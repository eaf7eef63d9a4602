package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// TestReviewEndlessJobAllPruned: epochs: 0 over inputs whose every row
// group a filter rules out by statistics. The error message and
// docs/pipeline.md (epochs) promise it fails at once; it spins instead.
func TestReviewEndlessJobAllPruned(t *testing.T) {
	abs, _ := filepath.Abs("../testdata/small")
	src := fmt.Sprintf("name: pruned\ninputs: [%s]\ncolumns: [row_id]\nbatch: {size: 10}\nepochs: 0\nring: {dir: %s}\npipeline:\n  - filter: \"row_id < 0\"\n", abs, t.TempDir())
	job, err := spec.Parse("", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := engine.Run(ctx, job, engine.Options{Remove: true})
	if ctx.Err() != nil {
		t.Fatalf("epochs: 0 with every row group pruned ran until the deadline (%d epochs, %d units pruned, err %v); want it to fail at once with \"nothing to read\"", st.Epochs, st.UnitsPruned, err)
	}
	if err == nil || !strings.Contains(err.Error(), "nothing to read") {
		t.Fatalf("err %v, want \"nothing to read\"", err)
	}
}

// TestReviewTooManyResumeCursorsLeavesRingsOpen: Run refuses more
// resume cursors than ranks only after it made the rings and handed them
// to Ready, and returns without failing or closing them: their producers
// stay alive (heartbeat) and a trainer that opened its ring waits for
// ever.
func TestReviewTooManyResumeCursorsLeavesRingsOpen(t *testing.T) {
	dir := t.TempDir()
	abs, _ := filepath.Abs("../testdata/small")
	src := fmt.Sprintf("inputs: [%s]\ncolumns: [row_id]\nbatch: {size: 100}\nworld_size: 2\nring: {dir: %q, name: r, slots: 3}\n", abs, dir)
	job, err := spec.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	errs := make(chan error, 2)
	started := 0
	opts := engine.Options{Resume: []engine.Cursor{{}, {}, {}}}
	opts.Ready = func(rings []string) {
		started = len(rings)
		for _, name := range rings {
			go func() { errs <- eachBatch(ctx, dir, name, func(*shm.Batch) {}) }()
		}
	}
	_, err = engine.Run(context.Background(), job, opts)
	if err == nil || !strings.Contains(err.Error(), "resume cursors") {
		t.Fatalf("Run: %v, want an error about the resume cursors", err)
	}
	for range started {
		if e := <-errs; ctx.Err() != nil {
			t.Fatalf("Run failed (%v) but a trainer reading its ring still waited 5s (%v): the rings were neither failed nor closed", err, e)
		}
	}
}
