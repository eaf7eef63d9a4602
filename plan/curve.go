package plan

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// Point is one measurement of the scaling curve: the pipeline produced
// Rate samples/s with Cores cores.
type Point struct {
	Cores float64 `json:"cores"`
	Rate  float64 `json:"samples_per_s"`
}

// Curve is the pipeline's throughput as a function of cores: the
// parallel stages (decode and ops, one unit per worker) scale with cores
// up to contention, and a serial stage (the batcher packing into rings)
// caps the whole:
//
//	Rate(k) = min(k·PerCore / (1 + Serial·(k−1)), Ceiling)   for k ≥ 1
//	Rate(k) = min(k·PerCore, Ceiling)                        for k < 1
//
// Serial is Amdahl's serial share: 0 scales linearly, 1 never gains from
// a second core. Ceiling 0 means no cap is known.
type Curve struct {
	PerCore float64 `json:"per_core_samples_per_s"`
	Serial  float64 `json:"serial_share"`
	Ceiling float64 `json:"ceiling_samples_per_s"`
	// Points are the measurements the curve was fitted to.
	Points []Point `json:"points"`
}

// ErrNoPoints is Fit's error without a usable measurement.
var ErrNoPoints = errors.New("plan: no measured point with cores > 0 and a rate > 0")

// Fit fits a Curve to measured points, with ceiling as the serial stage's
// cap (0: none). One point gives a line through it (Serial 0): nothing
// measured says it bends. Two or more give the Serial share, in [0, 1],
// that minimizes the squared relative error, PerCore solved in closed
// form for each candidate share.
func Fit(points []Point, ceiling float64) (Curve, error) {
	var ps []Point
	for _, p := range points {
		if p.Cores > 0 && p.Rate > 0 && !math.IsInf(p.Rate, 0) && !math.IsNaN(p.Rate) {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return Curve{}, ErrNoPoints
	}
	if ceiling < 0 || math.IsNaN(ceiling) {
		return Curve{}, fmt.Errorf("plan: ceiling %v: want 0 (none) or a positive rate", ceiling)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Cores < ps[j].Cores })
	c := Curve{Ceiling: ceiling, Points: ps}
	best := math.Inf(1)
	steps := 1000
	if distinctCores(ps) < 2 {
		steps = 0
	}
	for i := 0; i <= steps; i++ {
		s := float64(i) / 1000
		// Minimize Σ ((r − P·g)/r)² over P: P = Σ(g/r) / Σ(g²/r²).
		var num, den float64
		for _, p := range ps {
			g := p.Cores / (1 + s*(p.Cores-1))
			num += g / p.Rate
			den += g * g / (p.Rate * p.Rate)
		}
		per := num / den
		var e float64
		for _, p := range ps {
			d := (p.Rate - per*p.Cores/(1+s*(p.Cores-1))) / p.Rate
			e += d * d
		}
		if e < best-1e-15 {
			best, c.PerCore, c.Serial = e, per, s
		}
	}
	return c, nil
}

func distinctCores(ps []Point) int {
	n := 0
	for i, p := range ps {
		if i == 0 || p.Cores != ps[i-1].Cores {
			n++
		}
	}
	return n
}

// Rate returns the samples/s the curve predicts with cores cores.
func (c Curve) Rate(cores float64) float64 {
	if cores <= 0 {
		return 0
	}
	// Up to one core a share of a core gives that share of its rate:
	// Amdahl's law speaks of adding cores, not of taking a part of one.
	r := cores * c.PerCore
	if cores > 1 {
		r /= 1 + c.Serial*(cores-1)
	}
	if c.Ceiling > 0 {
		r = min(r, c.Ceiling)
	}
	return r
}

// Limit is the most the curve reaches with any number of cores: the
// ceiling, or PerCore/Serial (Amdahl's bound), whichever is lower;
// +Inf when neither binds.
func (c Curve) Limit() float64 {
	l := math.Inf(1)
	if c.Serial > 0 {
		l = c.PerCore / c.Serial
	}
	if c.Ceiling > 0 {
		l = min(l, c.Ceiling)
	}
	return l
}

// CoresFor returns the cores (a real number, not rounded) the curve needs
// for rate samples/s, and false when no number of cores reaches it.
func (c Curve) CoresFor(rate float64) (float64, bool) {
	if rate <= 0 {
		return 0, true
	}
	if c.PerCore <= 0 || rate > c.Limit() || c.Serial > 0 && rate >= c.PerCore/c.Serial {
		return math.Inf(1), false
	}
	if rate <= c.PerCore {
		return rate / c.PerCore, true
	}
	// rate = k·P/(1+s(k−1))  ⇔  k = rate(1−s) / (P − rate·s)
	return rate * (1 - c.Serial) / (c.PerCore - rate*c.Serial), true
}

// RoundUp rounds a need up to whole units, forgiving the measurement's
// last digits: 2.0000001 cores is 2 cores, 2.01 is 3.
func RoundUp(x float64) int {
	if x <= 0 || math.IsNaN(x) {
		return 0
	}
	if math.IsInf(x, 1) || x > math.MaxInt32 {
		return math.MaxInt32
	}
	f := math.Floor(x)
	if x-f <= 1e-6*max(1, x) {
		return int(f)
	}
	return int(f) + 1
}
