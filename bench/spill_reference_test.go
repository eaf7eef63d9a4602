package bench

import (
	"os"
	"testing"
)

// The spill measurement's reference, the pipeline alone on one core, runs
// on the spec's own units (whole row groups for the example): slices of
// 16,384 rows, cut so that two sides balance, decode about 1.5x slower
// on the bench's data and would be a weaker reference. The run with the
// peer still gets the slices.
func TestSpillReferenceRunsOnTheSpecsOwnUnits(t *testing.T) {
	cfg := SpillConfig{Spec: "../examples/ctr-8rank.yaml", Data: t.TempDir()}
	cfg.defaults()
	text, err := os.ReadFile(cfg.Spec)
	if err != nil {
		t.Fatal(err)
	}
	job, err := spillJob(cfg, text, cfg.Data+"/parquet", cfg.Data+"/spam.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if job.Decode.MaxUnitRows != 0 {
		t.Errorf("the local-alone reference is cut into units of at most %d rows; the spec says row groups", job.Decode.MaxUnitRows)
	}
	if s := slicedJob(job, -1); s.Decode.MaxUnitRows != 16384 || job.Decode.MaxUnitRows != 0 {
		t.Errorf("the run with the peer has units of at most %d rows (want 16384), the reference %d (want 0)", s.Decode.MaxUnitRows, job.Decode.MaxUnitRows)
	}
}
