package pool_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/lastmile/lastmile/pool"
)

// BenchmarkRunOverhead measures what the pool costs per unit: units do
// nothing, so ns/op is the claim, the reorder ring, the wake-ups and the
// emit call, per unit.
//
// With the default InFlight of 2*Workers and units that take no time, one
// side always waits for the other, so about every other unit parks and
// wakes a goroutine: that is most of the cost. A wider window lets both
// sides run in bursts and parks rarely.
func BenchmarkRunOverhead(b *testing.B) {
	for _, c := range []pool.Config{
		{Workers: 1}, {Workers: 2}, {Workers: 4},
		{Workers: 1, InFlight: 64}, {Workers: 2, InFlight: 64}, {Workers: 4, InFlight: 64},
	} {
		name := fmt.Sprintf("W=%d", c.Workers)
		if c.InFlight != 0 {
			name += fmt.Sprintf("/InFlight=%d", c.InFlight)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			err := pool.Run(context.Background(), c, b.N,
				func(_ context.Context, _, i int, buf int) (int, error) { return i, nil },
				func(int, int) error { return nil })
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}

// spinIters is about 1 ms of CPU for spin: 2.8 ns per iteration on the
// 2-core dev VM (Xeon, measured with per-thread CPU time). It is a constant,
// not calibrated at start-up, so that runs under load do the same work as
// runs on an idle machine; cpu-us/unit reports what it really took.
const spinIters = 360_000

var sink uint64

// spin is CPU-bound work that touches no memory: a xorshift chain the
// compiler cannot shorten.
func spin(iters int, seed uint64) uint64 {
	x := seed | 1
	for range iters {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// BenchmarkRunScaling runs units of about 1 ms of CPU each: the decode
// stage's case. units/s with W=2 over W=1 is the speedup; on two idle cores
// it should be 1.9x or better. cpu-us/unit is the process's CPU time per
// unit (the benchmark framework and the GC included): if the pool's
// overhead is negligible it is the same for W=1 and W=2, whatever else
// runs on the machine, while units/s with W=2 drops when another process
// takes one of the two cores.
func BenchmarkRunScaling(b *testing.B) {
	for _, w := range []int{1, 2} {
		b.Run(fmt.Sprintf("W=%d", w), func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			var acc uint64
			err := pool.Run(context.Background(), pool.Config{Workers: w}, b.N,
				func(_ context.Context, _, i int, _ uint64) (uint64, error) {
					return spin(spinIters, uint64(i)), nil
				},
				func(_ int, r uint64) error { acc += r; return nil })
			if err != nil {
				b.Fatal(err)
			}
			sink = acc
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "units/s")
			if cpu := cpuTime() - cpu0; cpu > 0 {
				b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/unit")
			}
		})
	}
}
