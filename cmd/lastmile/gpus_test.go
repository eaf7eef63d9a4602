package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/cuda/cudatest"
	"github.com/lastmile/lastmile/gpu"
)

// The GPU commands on a host without a GPU, a driver or NVML: they run,
// and say so plainly.
func TestGPUCommandsWithoutGPU(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.so.1")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"gpus", "-nvml", missing}, 0, "no GPU or driver found"},
		{[]string{"gpus", "-json", "-nvml", missing}, 0, `"no_gpu": "no GPU or driver found`},
		{[]string{"gpu", "check", "-libcuda", missing, "-nvml", missing}, 1, "no GPU or driver found"},
		{[]string{"gpu", "check", "-json", "-libcuda", missing, "-nvml", missing}, 1, `"no_gpu": "no GPU or driver found`},
		{[]string{"gpu"}, 2, ""},
		{[]string{"gpu", "check", "-sizes", "lots"}, 2, ""},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String(), tc.want) {
			t.Errorf("lastmile %v: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args, code, out.String(), errb.String(), tc.code, tc.want)
		}
	}
}

// TestGPUCheckFake runs the self-test against the fake libcuda.
func TestGPUCheckFake(t *testing.T) {
	cudatest.Build(t)
	var out, errb bytes.Buffer
	run(context.Background(), []string{"gpu", "check", "-json", "-iters", "2", "-sizes", "1MiB,2MiB",
		"-shm-dir", t.TempDir(), "-nvml", filepath.Join(t.TempDir(), "missing.so.1")}, &out, &errb)
	var r gpu.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("gpu check -json: %v\n%s\n%s", err, out.String(), errb.String())
	}
	if r.NoGPU != "" || len(r.Measurements) != 6 || len(r.GPUs) != 1 {
		t.Fatalf("report: %+v", r)
	}
	out.Reset()
	run(context.Background(), []string{"gpu", "check", "-iters", "2", "-sizes", "1MiB", "-shm-dir", t.TempDir()}, &out, &errb)
	for _, want := range []string{"Fake GPU 0", "ring slot, registered in place", "PASS  gpu 0", "checks"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("gpu check output lacks %q:\n%s", want, out.String())
		}
	}
}
