//go:build linux && cgo

package gpu_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/cuda"
	"github.com/lastmile/lastmile/cuda/cudatest"
	"github.com/lastmile/lastmile/gpu"
)

// noNVML points Inventory at a library that does not exist, so that the
// tests do not depend on whether this host has NVML.
var noNVML = gpu.Config{NVML: "/nonexistent/libnvidia-ml.so.1"}

func TestInventoryWithoutNVML(t *testing.T) {
	_, err := gpu.Inventory(noNVML)
	if !gpu.NoGPU(err) || !strings.Contains(err.Error(), "no NVIDIA driver") {
		t.Fatalf("Inventory without NVML: %v, want ErrNoNVML saying there is no driver", err)
	}
}

func TestCheckNoDriver(t *testing.T) {
	r, err := gpu.Check(context.Background(), gpu.CheckConfig{
		CUDA: cuda.Config{Library: filepath.Join(t.TempDir(), "libcuda.so.1")}, NVML: noNVML})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.NoGPU, "no GPU or driver found") || r.Passed() || len(r.Measurements) != 0 {
		t.Fatalf("report without a driver: %+v", r)
	}
}

// TestCheckWithFake runs the whole self-test against the fake libcuda
// and checks what it asked of the driver.
func TestCheckWithFake(t *testing.T) {
	f := cudatest.Build(t)
	dir := t.TempDir()
	sizes := []int64{1 << 20, 2 << 20}
	r, err := gpu.Check(context.Background(), gpu.CheckConfig{NVML: noNVML, Sizes: sizes, Iters: 3, Rounds: 2, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if r.NoGPU != "" || r.Inventory != "cuda" || len(r.GPUs) != 1 || r.GPUs[0].PCIBusID != "0000:3b:00.0" {
		t.Fatalf("report: %+v", r)
	}
	count := map[string]int{}
	for _, m := range r.Measurements {
		count[m.Source]++
		if m.GBps <= 0 {
			t.Errorf("measurement %+v: no bandwidth", m)
		}
	}
	for _, src := range []string{gpu.SrcPageable, gpu.SrcRegistered, gpu.SrcPinned} {
		if count[src] != len(sizes) {
			t.Errorf("%d measurements of %q, want %d", count[src], src, len(sizes))
		}
	}
	var registered bool
	for _, c := range r.Checks {
		if strings.Contains(c.Name, "register a ring in place") {
			registered = c.Pass
		}
	}
	if !registered {
		t.Fatalf("checks: %+v", r.Checks)
	}
	calls := f.Calls(t, false)
	regs := cudatest.Find(calls, "cuMemHostRegister_v2")
	unregs := cudatest.Find(calls, "cuMemHostUnregister")
	if len(regs) != 1 || len(unregs) != 1 || regs[0].Args["align2m"] != "1" || unregs[0].Args["mapped"] != "1" {
		t.Fatalf("registrations %v, unregistrations %v: want one of each, 2 MiB-aligned, unregistered while mapped", regs, unregs)
	}
	pinned := map[string]int{}
	for _, c := range cudatest.Find(calls, "cuMemcpyHtoDAsync_v2") {
		pinned[c.Args["pinned"]]++
	}
	// 5 copies per size (2 untimed) from each source: pageable ones
	// unpinned, one round; registered and cuMemAllocHost ones pinned, in
	// two alternating rounds, each keeping one measurement per size.
	if per := 5 * len(sizes); pinned["0"] != per || pinned["1"] != 2*2*per {
		t.Fatalf("copies by pinned-ness %v, want %d pageable and %d pinned", pinned, per, 4*per)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the self-test left %d files in the ring directory", len(left))
	}
}

func TestCheckRegisterFails(t *testing.T) {
	f := cudatest.Build(t)
	f.Fail(t, "cuMemHostRegister_v2=1")
	dir := t.TempDir()
	r, err := gpu.Check(context.Background(), gpu.CheckConfig{NVML: noNVML, Sizes: []int64{1 << 20}, Iters: 1, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if r.Passed() {
		t.Fatal("the self-test passed although registration failed")
	}
	var saw bool
	for _, c := range r.Checks {
		if strings.Contains(c.Name, "register a ring in place") && !c.Pass && strings.Contains(c.Detail, "CUDA_ERROR_INVALID_VALUE") {
			saw = true
		}
	}
	if !saw {
		t.Fatalf("no failed registration check naming the CUresult: %+v", r.Checks)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left %d files", len(left))
	}
}

// TestCheckCopyFailsMidway: a copy that fails after others were queued
// ends the self-test; its cleanup waits for the stream before it frees,
// unregisters and unmaps the host memory those copies read (as
// DeviceRing.Close does). The fake's copies are synchronous, so the test
// checks the order of the calls, which a real driver's queued DMA needs.
func TestCheckCopyFailsMidway(t *testing.T) {
	f := cudatest.Build(t)
	cfg := gpu.CheckConfig{NVML: noNVML, Sizes: []int64{1 << 20}, Iters: 4, Dir: t.TempDir()}
	// A clean run first, to find the copies made from the registered ring.
	if _, err := gpu.Check(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	n, registered := 0, false
	for _, c := range f.Calls(t, false) {
		switch {
		case c.Name == "cuMemHostRegister_v2":
			registered = true
		case c.Name == "cuMemcpyHtoDAsync_v2":
			n++
		}
		if registered && c.Name == "cuMemcpyHtoDAsync_v2" {
			break
		}
	}
	if !registered {
		t.Fatal("the self-test registered no ring")
	}
	// The same run on a fresh log, the second copy from the ring failing.
	f.Log = filepath.Join(t.TempDir(), "calls.log")
	t.Setenv("FAKECUDA_LOG", f.Log)
	f.Fail(t, fmt.Sprintf("cuMemcpyHtoDAsync_v2=1@%d", n+1))
	if r, err := gpu.Check(context.Background(), cfg); err == nil && r.Passed() {
		t.Fatal("the self-test passed although a copy failed")
	}
	failed, sync, unreg := -1, -1, -1
	for i, c := range f.Calls(t, false) {
		switch {
		case c.Name == "cuMemcpyHtoDAsync_v2" && c.Result != 0 && failed < 0:
			failed = i
		case c.Name == "cuStreamSynchronize" && failed >= 0 && sync < 0:
			sync = i
		case c.Name == "cuMemHostUnregister" && failed >= 0 && unreg < 0:
			unreg = i
		}
	}
	if failed < 0 || unreg < 0 || sync < 0 || sync > unreg {
		t.Fatalf("after the failed copy (call %d): stream synchronized at call %d, ring unregistered at call %d: want the wait first", failed, sync, unreg)
	}
}
