package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
)

// writeRunSpec writes a job over testdata/small producing into ringDir.
func writeRunSpec(t *testing.T, ringDir string) string {
	t.Helper()
	data, _ := filepath.Abs("../../testdata/small")
	p := filepath.Join(t.TempDir(), "job.yaml")
	src := fmt.Sprintf("version: 1\nname: rm\ninputs: [%s]\ncolumns: [row_id, label]\nbatch: {size: 500, last: keep}\nring: {dir: %q, slots: 3}\n", data, ringDir)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunRemovesRings: `lastmile run` removes its rings once the consumer
// has read every batch, and at exit when nobody read them; -keep leaves
// them.
func TestRunRemovesRings(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		consumer bool
		keep     bool
	}{
		{"consumed", nil, true, false},
		{"keep", []string{"-keep"}, true, true},
		{"old -remove=false", []string{"-remove=false"}, true, true},
		{"nobody attached: interrupted", nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ringDir := t.TempDir()
			specPath := writeRunSpec(t, ringDir)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan string, 1)
			if tc.consumer {
				go func() {
					var out, stderr bytes.Buffer
					code := run(ctx, []string{"cat", "-shm-dir", ringDir, "lastmile.rm"}, &out, &stderr)
					done <- fmt.Sprintf("cat exited %d: %s%s", code, out.String(), stderr.String())
				}()
			} else {
				// Nobody reads: production stops on the full ring; Ctrl-C.
				time.AfterFunc(500*time.Millisecond, cancel)
			}
			var stdout, stderr bytes.Buffer
			code := run(ctx, append(append([]string{"run"}, tc.args...), specPath), &stdout, &stderr)
			if tc.consumer {
				if code != 0 {
					t.Fatalf("run exited %d: %s", code, stderr.String())
				}
				if msg := <-done; !strings.HasPrefix(msg, "cat exited 0") {
					t.Fatal(msg)
				}
			} else if code != 130 {
				t.Fatalf("run exited %d, want 130 (interrupted): %s", code, stderr.String())
			}
			_, err := os.Stat(filepath.Join(ringDir, "lastmile.rm"))
			if tc.keep && err != nil {
				t.Errorf("-keep: ring gone: %v", err)
			}
			if !tc.keep && !os.IsNotExist(err) {
				t.Errorf("ring left behind (stat: %v)", err)
			}
		})
	}
}

// TestRunSummaryLeavesWaitsOut: the rates and pack time of run's summary
// leave out the time production waited on trainers.
func TestRunSummaryLeavesWaitsOut(t *testing.T) {
	st := engine.Stats{Epochs: 1, Units: 4, Batches: 10, Rows: 1000, Bytes: 2e6, Workers: 2,
		Elapsed: 10 * time.Second, FullWait: 6 * time.Second, Drain: 2 * time.Second,
		Decode: 3 * time.Second, Pack: 500 * time.Millisecond}
	got := runSummary(st)
	for _, want := range []string{"in 10.00s", "500 rows/s, 1 MB/s over 2.00s of production", "pack 0.50s",
		"waited on trainers 8.00s (full rings 6.00s, final drain 2.00s)"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "left out") {
		t.Errorf("summary %q speaks of pruning where nothing was pruned", got)
	}
	for _, tc := range []struct {
		units, files int
		want         string
	}{
		{9, 2, "; the filters left out 9 units and 2 files, unread, by their statistics or partition values"},
		{1, 0, "; the filters left out 1 unit and 0 files, unread, by their statistics or partition values"},
		{0, 1, "; the filters left out 0 units and 1 file, unread, by their statistics or partition values"},
	} {
		st.UnitsPruned, st.FilesPruned = tc.units, tc.files
		if got := runSummary(st); !strings.HasSuffix(got, tc.want) {
			t.Errorf("summary %q does not end %q", got, tc.want)
		}
	}
}

// TestFullRanks: a rank's ring is full for the producer when its unread
// batches and the slots production holds fill it (run -v names such ranks:
// a rank nobody reads stalls every rank).
func TestFullRanks(t *testing.T) {
	stats := []shm.ProducerStats{
		{Slots: 4, Head: 10, Tail: 12},          // two free
		{Slots: 4, Head: 10, Tail: 14},          // full of unread batches
		{Slots: 4, Head: 10, Tail: 13, Held: 1}, // the last slot being filled
		{Slots: 4},                              // nothing yet
	}
	if got := fullRanks(stats); fmt.Sprint(got) != "[1 2]" {
		t.Errorf("full ranks %v, want [1 2]", got)
	}
}
