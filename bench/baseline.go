package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"

	"github.com/lastmile/lastmile/spec"
)

// measureBaselines runs each of cfg.BaselineVariants (f) cfg.Repeats
// times, as often as the pipeline runs, keeping the best overall and of
// each style, then the best of each style again with the training step of
// r.StepMS (g).
func measureBaselines(ctx context.Context, cfg PipelineConfig, job *spec.Job, r *PipelineReport, npyDir, spam string) error {
	for i := range cfg.Repeats {
		for _, v := range cfg.BaselineVariants {
			fmt.Fprintf(cfg.Log, "(f) baseline: DataLoader, %s style, num_workers %d, run %d of %d ...\n", v.Style, v.Workers, i+1, cfg.Repeats)
			m, err := runBaseline(ctx, cfg, job, v, npyDir, spam)
			if err != nil {
				return err
			}
			r.addBaseline(m)
		}
	}
	// The leanest main process again, taking batches its workers made
	// first (--ready), as lastmile's trainer is measured: where that is
	// leaner, it is (g)'s reference.
	if v := (BaselineVariant{Style: fmt.Sprint(r.Lean["style"]), Workers: int(num(r.Lean["workers"]))}); r.Lean != nil && v.Workers > 0 {
		for i := range cfg.Repeats {
			fmt.Fprintf(cfg.Log, "(g) baseline: DataLoader, %s style, num_workers %d, batches waiting, run %d of %d ...\n", v.Style, v.Workers, i+1, cfg.Repeats)
			m, err := runBaseline(ctx, cfg, job, v, npyDir, spam, "--ready")
			if err != nil {
				return err
			}
			r.addBaseline(m)
		}
	}
	for _, b := range []map[string]any{r.LeanRow, r.LeanBatch} {
		if b == nil {
			continue
		}
		v := BaselineVariant{Style: fmt.Sprint(b["style"]), Workers: int(num(b["workers"]))}
		fmt.Fprintf(cfg.Log, "(g) baseline: DataLoader, %s style, num_workers %d, %.0f ms step ...\n", v.Style, v.Workers, r.StepMS)
		m, err := runBaseline(ctx, cfg, job, v, npyDir, spam, "--step-ms", fmt.Sprint(r.StepMS))
		if err != nil {
			return err
		}
		r.BaselinesStep = append(r.BaselinesStep, m)
	}
	return nil
}

// addBaseline records one baseline run: in Best and its style's Best (by
// steady rows/s, the references of (f)) and its style's Lean (by the main
// process's CPU per batch, the references of (g)).
func (r *PipelineReport) addBaseline(m map[string]any) {
	better := func(a, b map[string]any) bool {
		return b == nil || num(a["steady_rows_per_s"]) > num(b["steady_rows_per_s"])
	}
	leaner := func(a, b map[string]any) bool {
		c := num(a["main_cpu_ms_per_batch"])
		return c > 0 && (b == nil || c < num(b["main_cpu_ms_per_batch"]))
	}
	r.Baselines = append(r.Baselines, m)
	// A run whose workers made the epoch first (ready) is a reference of
	// (g) only: its rows/s count no overlap of the two.
	ready, _ := m["ready"].(bool)
	if !ready && better(m, r.Best) {
		r.Best = m
	}
	if leaner(m, r.Lean) {
		r.Lean = m
	}
	switch m["style"] {
	case "row":
		if !ready && better(m, r.BestRow) {
			r.BestRow = m
		}
		if leaner(m, r.LeanRow) {
			r.LeanRow = m
		}
	case "batch":
		if !ready && better(m, r.BestBatch) {
			r.BestBatch = m
		}
		if leaner(m, r.LeanBatch) {
			r.LeanBatch = m
		}
	}
}

// waiting names a baseline run whose batches waited for its main process.
func waiting(m map[string]any) string {
	if ready, _ := m["ready"].(bool); ready {
		return ", batches waiting"
	}
	return ""
}

// runBaseline runs the DataLoader baseline script once in variant v on the
// .npy copy of the data, with job's batch size and seed, and returns its
// JSON report.
func runBaseline(ctx context.Context, cfg PipelineConfig, job *spec.Job, v BaselineVariant, npyDir, spam string, extra ...string) (map[string]any, error) {
	args := append([]string{cfg.Baseline, "--npy", npyDir, "--spam", spam,
		"--batch", fmt.Sprint(job.Batch.Size), "--workers", fmt.Sprint(v.Workers), "--style", v.Style,
		"--seed", fmt.Sprint(job.Seed), "--json"}, extra...)
	out, err := exec.CommandContext(ctx, cfg.Python, args...).Output()
	if err != nil {
		return nil, fmt.Errorf("baseline %s/%d: %w", v.Style, v.Workers, exitDetail(err))
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("baseline output %q: %w", out, err)
	}
	return m, nil
}

func exitDetail(err error) error {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
	}
	return err
}
