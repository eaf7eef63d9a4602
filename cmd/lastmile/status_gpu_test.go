package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestPrintJobGPU(t *testing.T) {
	raw := []byte(`{"id":"x","gpu":{"staging":"host","placement":[
		{"rank":0,"gpu":1,"uuid":"GPU-b","numa_node":1,"cpus":"24-47","why":"LOCAL_RANK"},
		{"rank":1,"gpu":-1,"numa_node":-1,"why":"no GPU inventory: NVML unavailable"}]}}`)
	var out bytes.Buffer
	if err := printJobGPU(&out, raw); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gpu staging  host", "rank 0       GPU 1 GPU-b (LOCAL_RANK), ring pages on NUMA node 1, CPUs 24-47",
		"rank 1       not placed: no GPU inventory: NVML unavailable"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := printJobGPU(&out, []byte(`{"id":"x"}`)); err != nil || out.Len() != 0 {
		t.Fatalf("a job view without gpu printed %q, %v", out.String(), err)
	}
}
