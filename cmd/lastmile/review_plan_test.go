package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestReviewPlanTargetOverflow: -samples-per-gpu 1e308 with -gpus 8 is
// finite per GPU and +Inf over the host. setup let it through, plan
// measured for the whole run and then printed "+Inf samples/s in all",
// wrote NaN into the plot, and -json failed ("json: unsupported value:
// +Inf", exit 1). It must be a usage error before anything is measured.
func TestReviewPlanTargetOverflow(t *testing.T) {
	job, err := readJob(context.Background(), "../../examples/tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := parsePlanFlags([]string{"-samples-per-gpu", "1e308", "-gpus", "8", "job.yaml"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.setup(job); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "-samples-per-gpu") {
		t.Errorf("setup gave %v, want a usage error naming -samples-per-gpu", err)
	}
}
