package bench

import (
	"context"
	"fmt"
	"math"

	"github.com/lastmile/lastmile/plan"
)

// Validation is a prediction checked by running the job at its size.
type Validation struct {
	Cores int `json:"cores"`
	// Capacity is the job with trainers taking batches as fast as they
	// come: the most it produces at Cores cores, against the curve's
	// PredictedCapacity; Error is (measured − predicted)/predicted, and
	// Within whether |Error| ≤ 10%.
	Capacity          PlanPoint `json:"capacity"`
	PredictedCapacity float64   `json:"predicted_capacity_samples_per_s"`
	Error             float64   `json:"error"`
	Within            bool      `json:"within_10_percent"`
	// A host other work loads gives the process less than its quota, and
	// not the same share from one run to the next. NormalizedError
	// compares the rates per core the process got (rate × cores / CPU
	// got), the measurement's against the validation's: what the
	// prediction carries over from one run to another whatever the load;
	// NormalizedWithin whether it is within ±10%.
	CPUGot           float64 `json:"cpu_got_cores"`
	MeasureCPUGot    float64 `json:"measure_cpu_got_per_core"`
	NormalizedError  float64 `json:"normalized_error"`
	NormalizedWithin bool    `json:"normalized_within_10_percent"`
	// AtTarget is the job with trainers taking the target rate: its
	// throughput and stall against the target and PredictedStall.
	AtTarget       PlanPoint `json:"at_target"`
	TargetRate     float64   `json:"target_samples_per_s"`
	PredictedStall float64   `json:"predicted_stall"`
	Limit          string    `json:"cpu_limit_method"`
}

// Validate runs the job of cfg at cores cores (workers as many), first
// with trainers as fast as they come, then at the target rate, for
// cfg.Seconds each (seconds > 0 overrides), and sets the result beside
// what curve predicts.
//
// gotPerCore is the CPU the process got per core of its quota while the
// curve was measured (0: unknown), for NormalizedError.
func Validate(ctx context.Context, cfg PlanConfig, curve plan.Curve, t plan.Target, cores int, seconds, gotPerCore float64) (*Validation, error) {
	cfg.defaults()
	if cores <= 0 {
		return nil, fmt.Errorf("validate: %d cores: want at least 1", cores)
	}
	if cfg.Limit == nil {
		l, err := NewCPULimit()
		if err != nil {
			return nil, err
		}
		defer l.Close()
		cfg.Limit = l
	}
	cfg.GPUs = t.GPUs
	v := &Validation{Cores: cores, PredictedCapacity: curve.Rate(float64(cores)), TargetRate: t.HostRate(), Limit: cfg.Limit.Method()}
	cfg.Progress(1, 2, "validate: capacity at "+coresWord(float64(cores)))
	var err error
	if v.Capacity, err = measureBest(ctx, cfg, float64(cores), cores, seconds); err != nil {
		return nil, err
	}
	if v.PredictedCapacity > 0 {
		v.Error = (v.Capacity.Rate - v.PredictedCapacity) / v.PredictedCapacity
		v.Within = math.Abs(v.Error) <= 0.10
	}
	if c := v.Capacity; c.Seconds > 0 && c.CPUSeconds > 0 && gotPerCore > 0 && v.PredictedCapacity > 0 {
		v.CPUGot, v.MeasureCPUGot = c.CPUSeconds/c.Seconds, gotPerCore
		measured := c.Rate * float64(cores) / v.CPUGot
		predicted := v.PredictedCapacity / gotPerCore
		v.NormalizedError = (measured - predicted) / predicted
		v.NormalizedWithin = math.Abs(v.NormalizedError) <= 0.10
	}
	v.PredictedStall = plan.StallAt(t.HostRate() / v.PredictedCapacity)
	cfg.Progress(2, 2, "validate: simulated trainers at the target, "+coresWord(float64(cores)))
	if v.AtTarget, err = MeasureAt(ctx, cfg, float64(cores), cores, t.SamplesPerGPU, seconds); err != nil {
		return nil, err
	}
	return v, nil
}
