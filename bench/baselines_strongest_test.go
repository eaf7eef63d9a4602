package bench

import (
	"math"
	"strings"
	"testing"
)

// The targets (f) and (g) are held against the strongest baseline run,
// whichever style it is: the fastest of all for rows/s, the leanest main
// process of all for the trainer's CPU per batch. A weaker style may be
// reported beside them, never in their place.
func TestPipelineTargetsHoldTheStrongestBaseline(t *testing.T) {
	r := &PipelineReport{TrainerReady: map[string]any{"cpu_ms_per_batch": 0.05}}
	r.Pipeline.OutRowsPS, r.FirstEpoch.OutRowsPS = 400000, 160000
	for _, m := range []map[string]any{
		{"style": "batch", "workers": 0.0, "steady_rows_per_s": 220000.0, "main_cpu_ms_per_batch": 8.0},
		{"style": "batch", "workers": 2.0, "steady_rows_per_s": 150000.0, "main_cpu_ms_per_batch": 3.7},
		{"style": "row", "workers": 0.0, "steady_rows_per_s": 4000.0, "main_cpu_ms_per_batch": 330.0},
		{"style": "row", "workers": 2.0, "steady_rows_per_s": 7000.0, "main_cpu_ms_per_batch": 7.3},
	} {
		r.addBaseline(m)
	}
	r.evaluate()
	// (f) is the DataLoader rows/s target and the first-epoch line after it.
	var f, g []Target
	for i, x := range r.Targets {
		switch {
		case x.Info:
		case strings.Contains(x.Name, "DataLoader rows/s"):
			f = append(f, x)
			if i+1 < len(r.Targets) && !r.Targets[i+1].Info {
				f = append(f, r.Targets[i+1])
			}
		case strings.HasPrefix(x.Name, "trainer CPU per batch"):
			g = append(g, x)
		}
	}
	if len(f) != 2 {
		t.Fatalf("(f) targets: %+v", f)
	}
	for i, want := range []float64{400000 / 220000.0, 160000 / 220000.0} {
		if math.Abs(f[i].Value-want) > 1e-9 || f[i].Met != (want >= 1.5) {
			t.Errorf("(f) %q = %v (met %v), want %v against the fastest baseline (batch style)", f[i].Name, f[i].Value, f[i].Met, want)
		}
	}
	if !strings.Contains(f[0].Name, "batch") {
		t.Errorf("(f) %q does not name its reference's style", f[0].Name)
	}
	if len(g) != 1 {
		t.Fatalf("(g) targets: %+v", g)
	}
	if want := 0.05 / 3.7; math.Abs(g[0].Value-want) > 1e-9 || g[0].Met {
		t.Errorf("(g) %q = %v (met %v), want %v against the leanest main process (batch style, num_workers 2), missed", g[0].Name, g[0].Value, g[0].Met, want)
	}
	if !strings.Contains(g[0].Name, "batch") || !strings.Contains(g[0].Name, "num_workers 2") {
		t.Errorf("(g) %q does not name its reference", g[0].Name)
	}
}

// A baseline run whose workers made the epoch first (--ready) is a
// reference of (g) where its main process is the leaner, named as such,
// and never of (f): its rows/s count no overlap of workers and main
// process, so they are no throughput.
func TestReadyBaselineIsOnlyGsReference(t *testing.T) {
	r := &PipelineReport{TrainerReady: map[string]any{"cpu_ms_per_batch": 0.03}}
	r.Pipeline.OutRowsPS, r.FirstEpoch.OutRowsPS = 400000, 160000
	for _, m := range []map[string]any{
		{"style": "batch", "workers": 2.0, "steady_rows_per_s": 150000.0, "main_cpu_ms_per_batch": 3.7},
		{"style": "batch", "workers": 2.0, "steady_rows_per_s": 900000.0, "main_cpu_ms_per_batch": 2.9, "ready": true},
	} {
		r.addBaseline(m)
	}
	if r.Best["ready"] == true || r.BestBatch["ready"] == true {
		t.Fatalf("a ready run is (f)'s reference: %v", r.Best)
	}
	r.evaluate()
	for _, x := range r.Targets {
		if x.Info || !strings.HasPrefix(x.Name, "trainer CPU per batch") {
			continue
		}
		if want := 0.03 / 2.9; math.Abs(x.Value-want) > 1e-9 || !strings.Contains(x.Name, "batches waiting") {
			t.Fatalf("(g) %q = %v; want %v against the ready run, named", x.Name, x.Value, want)
		}
		return
	}
	t.Fatal("no (g) target")
}
