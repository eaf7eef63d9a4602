package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/spec"
)

// Each DataLoader variant runs as many times as the pipeline it is
// compared with (-pipeline-repeats), so that both sides are the best of
// the same number of runs.
func TestBaselinesRunAsOftenAsThePipeline(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	fake := filepath.Join(dir, "python")
	// Prints a baseline report naming its style and worker count, and
	// logs each call.
	script := `#!/bin/sh
echo "$*" >> ` + log + `
style=row; workers=0; prev=
for a in "$@"; do
  case "$prev" in --style) style=$a;; --workers) workers=$a;; esac
  prev=$a
done
echo "{\"style\": \"$style\", \"workers\": $workers, \"steady_rows_per_s\": 1000, \"main_cpu_ms_per_batch\": 5}"
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := PipelineConfig{Python: fake, Baseline: "dataloader.py", Repeats: 3}
	cfg.defaults()
	job := &spec.Job{}
	job.Batch.Size = 2048
	r := &PipelineReport{StepMS: 30}
	if err := measureBaselines(context.Background(), cfg, job, r, dir, filepath.Join(dir, "spam.parquet")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		var style, workers, step string
		for i := 0; i+1 < len(f); i++ {
			switch f[i] {
			case "--style":
				style = f[i+1]
			case "--workers":
				workers = f[i+1]
			case "--step-ms":
				step = " step"
			}
		}
		runs[style+"/"+workers+step]++
	}
	for _, v := range cfg.BaselineVariants {
		if k := v.Style + "/" + strconv.Itoa(v.Workers); runs[k] != cfg.Repeats {
			t.Errorf("%s ran %d times, want %d (the pipeline's repeats): %v", k, runs[k], cfg.Repeats, runs)
		}
	}
}
