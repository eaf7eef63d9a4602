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

// An endless job (epochs: 0) that can give no batch fails, saying so,
// instead of spinning through empty epochs for ever: every row group
// pruned by a filter's statistics (before any ring is made), every row
// dropped by a filter no statistic can prune or by a sample, or fewer rows
// than one step with last: drop (after its first epoch).
func TestEndlessJobWithoutBatches(t *testing.T) {
	abs, _ := filepath.Abs("../testdata/small")
	cases := []struct{ name, batch, pipeline string }{
		{"every row group pruned", "{size: 10}", "  - filter: \"row_id < 0\"\n"},
		{"every row filtered", "{size: 10}", "  - filter: \"hash_mod(row_id, 7) == 9\"\n"},
		{"every row sampled out", "{size: 10}", "  - sample: {key: row_id, rates: [{rate: 0.000000001}]}\n"},
		{"fewer rows than a step", "{size: 100000, last: drop}", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := fmt.Sprintf("name: nothing\ninputs: [%s]\ncolumns: [row_id]\nbatch: %s\nepochs: 0\nring: {dir: %s}\n", abs, c.batch, t.TempDir())
			if c.pipeline != "" {
				src += "pipeline:\n" + c.pipeline
			}
			job, err := spec.Parse("", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			st, err := engine.Run(ctx, job, engine.Options{Remove: true})
			if ctx.Err() != nil {
				t.Fatalf("ran until the deadline (%d epochs, %d units pruned, err %v); want it to fail with \"nothing to read\"", st.Epochs, st.UnitsPruned, err)
			}
			if err == nil || !strings.Contains(err.Error(), "nothing to read") || !strings.Contains(err.Error(), "epochs") {
				t.Fatalf("err %v, want \"nothing to read\" and what to do", err)
			}
			if st.Epochs > 1 {
				t.Errorf("failed after %d epochs, want at the first", st.Epochs)
			}
		})
	}
}

// TestTooManyResumeCursorsLeavesRingsOpen: Run refuses more
// resume cursors than ranks only after it made the rings and handed them
// to Ready, and returns without failing or closing them: their producers
// stay alive (heartbeat) and a trainer that opened its ring waits for
// ever.
func TestTooManyResumeCursorsLeavesRingsOpen(t *testing.T) {
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

// A resume cursor is the trainer's word: one so far past any epoch that
// the rows before it overflow is refused, not resumed at another place.
func TestResumeCursorPastAnyEpoch(t *testing.T) {
	abs, _ := filepath.Abs("../testdata/small")
	src := fmt.Sprintf("inputs: [%s]\ncolumns: [row_id]\nbatch: {size: 100}\nworld_size: 2\nring: {dir: %q, name: r, slots: 3}\n", abs, t.TempDir())
	job, err := spec.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ready := false
	_, err = engine.Run(context.Background(), job, engine.Options{
		Resume: []engine.Cursor{{}, {Epoch: 0, Batch: 1 << 62}},
		Ready:  func([]string) { ready = true },
	})
	if err == nil || !strings.Contains(err.Error(), "rank 1's resume cursor") || ready {
		t.Fatalf("err %v (rings made: %v), want the cursor refused before any ring", err, ready)
	}
}
