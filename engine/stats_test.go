package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// TestStatsLeaveTrainerWaitsOut: with a trainer slower than production,
// the run's pack time does not include the sleeps on its full ring
// (FullWait, counted apart), nor does Busy; Drain is the final wait of
// Linger; Workers is the goroutines that ran (one per unit at most).
func TestStatsLeaveTrainerWaitsOut(t *testing.T) {
	dir := t.TempDir()
	abs, _ := filepath.Abs("../testdata/small")
	job, err := spec.Parse("test.yaml", []byte("version: 1\nname: slow\ninputs: ["+abs+"]\ncolumns: [row_id]\n"+
		"batch: {size: 1000, last: keep}\nring: {dir: "+dir+", slots: 3}\ndecode: {workers: 64}\n"))
	if err != nil {
		t.Fatal(err)
	}
	const step = 30 * time.Millisecond
	done := make(chan error, 1)
	st, err := engine.Run(context.Background(), job, engine.Options{
		Linger: true,
		Ready: func(rings []string) {
			go func() {
				c, err := shm.Open(dir, rings[0])
				if err != nil {
					done <- err
					return
				}
				defer c.Close()
				for {
					if _, err := c.Next(context.Background()); err != nil {
						if errors.Is(err, io.EOF) {
							err = nil
						}
						done <- err
						return
					}
					time.Sleep(step) // a training step
				}
			}()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// 10 batches into 3 slots: production sleeps on the full ring for
	// about 7 steps and lingers for the last ones.
	if st.FullWait < 3*step {
		t.Errorf("FullWait %v, want at least %v", st.FullWait, 3*step)
	}
	if st.Pack >= st.FullWait/2 {
		t.Errorf("Pack %v includes the waits on the full ring (FullWait %v)", st.Pack, st.FullWait)
	}
	if st.Drain < step {
		t.Errorf("Drain %v, want at least one step (%v)", st.Drain, step)
	}
	if busy := st.Busy(); busy != st.Elapsed-st.FullWait-st.Drain {
		t.Errorf("Busy %v, want %v", busy, st.Elapsed-st.FullWait-st.Drain)
	}
	if st.Workers < 1 || st.Workers >= 64 {
		t.Errorf("Workers %d: want the goroutines that ran, at most one per unit", st.Workers)
	}
}

// TestLogKeys: the engine's log lines carry the caller's keys once (the
// daemon's logger names the job; the engine does not name it again) and
// the worker count that ran.
func TestLogKeys(t *testing.T) {
	dir := t.TempDir()
	abs, _ := filepath.Abs("../testdata/small")
	job, err := spec.Parse("test.yaml", []byte("version: 1\nname: logs\ninputs: ["+abs+"]\ncolumns: [row_id]\n"+
		"batch: {size: 1000, last: keep}\nring: {dir: "+dir+", slots: 16}\ndecode: {workers: 64}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})).With("job", "logs", "job_id", "abc")
	st, err := engine.Run(context.Background(), job, engine.Options{Logger: log, Remove: true})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) < 2 {
		t.Fatalf("log:\n%s", buf.String())
	}
	for _, l := range lines {
		seen := map[string]bool{}
		for _, f := range strings.Fields(l) {
			k, _, ok := strings.Cut(f, "=")
			if !ok || strings.Contains(k, `"`) {
				continue
			}
			if seen[k] {
				t.Errorf("key %s twice in %q", k, l)
			}
			seen[k] = true
		}
		if strings.Contains(l, "msg=planned") && !strings.Contains(l, fmt.Sprintf(" workers=%d ", st.Workers)) {
			t.Errorf("planned line %q: want workers=%d", l, st.Workers)
		}
	}
}

// TestProgressOpRows: Progress.OpRows gives the rows in and out of the
// pipeline's row-dropping ops.
func TestProgressOpRows(t *testing.T) {
	dir := t.TempDir()
	abs, _ := filepath.Abs("../testdata/small")
	job, err := spec.Parse("test.yaml", []byte("version: 1\nname: oprows\ninputs: ["+abs+"]\ncolumns: [row_id]\n"+
		"pipeline:\n  - filter: \"row_id % 2 == 0\"\nbatch: {size: 1000, last: keep}\nring: {dir: "+dir+", slots: 16}\n"))
	if err != nil {
		t.Fatal(err)
	}
	prog := new(engine.Progress)
	if _, err := engine.Run(context.Background(), job, engine.Options{Progress: prog, Remove: true}); err != nil {
		t.Fatal(err)
	}
	got := prog.OpRows()
	if len(got) != 1 || got[0].Op != "pipeline[0].filter" || got[0].In != fixtureRows || got[0].Out != fixtureRows/2 {
		t.Errorf("OpRows %+v, want the filter: %d rows in, %d out", got, fixtureRows, fixtureRows/2)
	}
}
