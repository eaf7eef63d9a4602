package bench

import (
	"fmt"
	"testing"
)

// The DataLoader baseline gets as many workers as the pipeline's decode
// workers (as well as 0 and 2): on a host of many cores a baseline held
// to 2 workers against a pipeline on all of them is not the strongest.
func TestBaselineVariantsMatchThePipelinesWorkers(t *testing.T) {
	cfg := PipelineConfig{Workers: 8}
	cfg.defaults()
	have := map[string]bool{}
	for _, v := range cfg.BaselineVariants {
		have[fmt.Sprintf("%s/%d", v.Style, v.Workers)] = true
	}
	for _, want := range []string{"batch/0", "batch/2", "batch/8", "row/0", "row/2", "row/8"} {
		if !have[want] {
			t.Errorf("no %s baseline in %v", want, cfg.BaselineVariants)
		}
	}
	cfg = PipelineConfig{Workers: 2}
	cfg.defaults()
	if len(cfg.BaselineVariants) != 4 {
		t.Errorf("2 workers: variants %v, want 0 and 2 of each style", cfg.BaselineVariants)
	}
}
