package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestPrintJobGPU(t *testing.T) {
	raw := []byte(`{"id":"x","gpu":{"staging":"host","placement":[
		{"rank":0,"gpu":1,"uuid":"GPU-b","numa_node":1,"cpus":"24-47","why":"LOCAL_RANK"},
		{"rank":1,"gpu":-1,"numa_node":-1,"why":"no GPU inventory: NVML unavailable"}],
		"device_staging":[{"rank":0,"mode":"device","pci_bus_id":"0000:3b:00.0","staged_batches":12},
		{"rank":1,"mode":"host","staged_batches":0,"why":"cuMemHostRegister_v2: CUDA_ERROR_OUT_OF_MEMORY"}]}}`)
	var out bytes.Buffer
	if err := printJobGPU(&out, raw); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gpu staging  host", "rank 0       GPU 1 GPU-b (LOCAL_RANK), ring pages on NUMA node 1, CPUs 24-47",
		"rank 1       not placed: no GPU inventory: NVML unavailable",
		"rank 0 staging  on the GPU (0000:3b:00.0) by lastmiled, 12 batches",
		"rank 1 staging  fell back to host staging after 0 batches: cuMemHostRegister_v2: CUDA_ERROR_OUT_OF_MEMORY"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := printJobGPU(&out, []byte(`{"id":"x"}`)); err != nil || out.Len() != 0 {
		t.Fatalf("a job view without gpu printed %q, %v", out.String(), err)
	}
}
