//go:build linux && cgo

package gpu_test

import (
	"context"
	"flag"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/gpu"
)

var realGPU = flag.Bool("gpu", false, "run the tests that need a real NVIDIA GPU and driver (make gpu-test)")

// TestRealGPUCheck runs the self-test on a real GPU and wants every check
// to pass: NVML lists the GPUs, the ring registers in place, and the
// registered ring copies at 0.9x the pinned reference or better.
func TestRealGPUCheck(t *testing.T) {
	if !*realGPU {
		t.Skip("needs a GPU: run with -gpu (make gpu-test)")
	}
	r, err := gpu.Check(context.Background(), gpu.CheckConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if r.NoGPU != "" {
		t.Skip(r.NoGPU)
	}
	for _, m := range r.Measurements {
		t.Logf("device %d  %-36s node %2d  %8d bytes  %6.2f GB/s", m.CUDADevice, m.Source, m.NUMANode, m.Bytes, m.GBps)
	}
	for _, c := range r.Checks {
		if !c.Pass {
			t.Errorf("FAIL %s: %s", c.Name, c.Detail)
		} else if strings.Contains(c.Name, "pinned") {
			t.Logf("PASS %s: %s", c.Name, c.Detail)
		}
	}
}
