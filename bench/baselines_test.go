package bench

import (
	"math"
	"strings"
	"testing"
)

// (f) holds lastmile to each style's fastest worker count; (g) to the one
// whose main process spent the least CPU a batch. With num_workers 0 the
// main process does all the work, so when it happens to be the faster
// count it must not become (g)'s reference: that made a 1.2% trainer read
// as 0.02%.
func TestBaselineReferences(t *testing.T) {
	r := &PipelineReport{TrainerReady: map[string]any{"cpu_ms_per_batch": 0.066}}
	for _, m := range []map[string]any{
		{"style": "batch", "workers": 0.0, "steady_rows_per_s": 87206.0, "main_cpu_ms_per_batch": 10.95},
		{"style": "batch", "workers": 2.0, "steady_rows_per_s": 36712.0, "main_cpu_ms_per_batch": 6.39},
		{"style": "row", "workers": 0.0, "steady_rows_per_s": 3661.0, "main_cpu_ms_per_batch": 330.93},
		{"style": "row", "workers": 2.0, "steady_rows_per_s": 3339.0, "main_cpu_ms_per_batch": 5.71},
	} {
		r.addBaseline(m)
	}
	if r.BestRow["workers"] != 0.0 || r.BestBatch["workers"] != 0.0 || r.Best["style"] != "batch" {
		t.Errorf("fastest: row %v, batch %v, overall %v", r.BestRow["workers"], r.BestBatch["workers"], r.Best["style"])
	}
	if r.LeanRow["workers"] != 2.0 || r.LeanBatch["workers"] != 2.0 {
		t.Errorf("leanest: row %v, batch %v", r.LeanRow["workers"], r.LeanBatch["workers"])
	}
	r.evaluate()
	found := 0
	for _, g := range r.Targets {
		switch {
		case strings.HasPrefix(g.Name, "trainer CPU per batch, batches waiting"):
			found++
			if want := 0.066 / 5.71; math.Abs(g.Value-want) > 1e-9 || g.Met || g.Info {
				t.Errorf("%s = %v (met %v), want %v, missed", g.Name, g.Value, g.Met, want)
			}
			if !strings.Contains(g.Name, "num_workers 2") {
				t.Errorf("%q does not name its reference's worker count", g.Name)
			}
		case strings.Contains(g.Name, "against the batch-style DataLoader"):
			found++
			if want := 0.066 / 6.39; math.Abs(g.Value-want) > 1e-9 {
				t.Errorf("%s = %v, want %v", g.Name, g.Value, want)
			}
		}
	}
	if found != 2 {
		t.Errorf("%d (g) figures in %+v", found, r.Targets)
	}
}
