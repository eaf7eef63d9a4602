//go:build linux && cgo

package gpu_test

import (
	"strings"
	"testing"

	"github.com/lastmile/lastmile/cuda/cudatest"
)

// TestStagerExclusiveProcessGPU: on a GPU in EXCLUSIVE_PROCESS compute
// mode (common on shared HPC nodes) only one process may hold a context.
// Device staging's context in lastmiled then either is refused (the trainer
// was first) or, worse, locks the trainer out of its own GPU (lastmiled was
// first: the trainer's CUDA init fails with "busy or unavailable"). The
// stager must check the compute mode and fall back before retaining a
// context.
func TestStagerExclusiveProcessGPU(t *testing.T) {
	rig := newStagerRig(t, 1, placed(1))
	t.Setenv("FAKECUDA_COMPUTE_MODE", "3")
	rig.publish(t, 0)
	if n := len(cudatest.Find(rig.f.Calls(t, false), "cuDevicePrimaryCtxRetain")); n != 0 {
		t.Fatalf("lastmiled retained a context on an EXCLUSIVE_PROCESS GPU (%d calls): the trainer would be locked out", n)
	}
	st := rig.st.Status()
	if len(st) != 1 || st[0].Mode != "host" || !strings.Contains(st[0].Why, "compute mode") {
		t.Fatalf("status %+v: want host staging, why naming the compute mode", st)
	}
	rig.st.Close()
}
