//go:build !unix

package pool_test

import "time"

// cpuTime is not measured here; BenchmarkRunScaling leaves out cpu-us/unit.
func cpuTime() time.Duration { return 0 }
