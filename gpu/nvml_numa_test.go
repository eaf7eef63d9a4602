//go:build linux && cgo

package gpu

import (
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// fakeNVML is one GPU at PCI 0000:3b:00.0 (the fake sysfs of testdata says
// its PCI root is on NUMA node 1, CPUs 24-47,72-95).
func fakeNVML(numaNode int, numaRet nvml.Return, cpuWords func(n int) ([]uint, nvml.Return)) nvml.Interface {
	busID := [32]int8{}
	for i, c := range "00000000:3B:00.0" {
		busID[i] = int8(c)
	}
	dev := &mock.Device{
		GetUUIDFunc:        func() (string, nvml.Return) { return "GPU-0000", nvml.SUCCESS },
		GetNameFunc:        func() (string, nvml.Return) { return "fake", nvml.SUCCESS },
		GetMemoryInfoFunc:  func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 1 << 30}, nvml.SUCCESS },
		GetPciInfoFunc:     func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{BusId: busID}, nvml.SUCCESS },
		GetNumaNodeIdFunc:  func() (int, nvml.Return) { return numaNode, numaRet },
		GetCpuAffinityFunc: cpuWords,
	}
	return &mock.Interface{
		DeviceGetHandleByIndexFunc: func(int) (nvml.Device, nvml.Return) { return dev, nvml.SUCCESS },
		ErrorStringFunc:            func(r nvml.Return) string { return "err" },
	}
}

// On a coherent platform (GH200, GB200 in NUMA mode) the GPU's memory is a
// NUMA node of its own, and nvmlDeviceGetNumaNodeId returns THAT node
// ("Get the NUMA node of the given GPU device. This only applies to
// platforms where the GPUs are NUMA nodes", nvml.h; nvidia-smi topo -m
// shows it as "GPU NUMA ID", beside the CPU-side "NUMA Affinity"). The
// ring's pages must go on the CPU node next to the GPU (the PCI device's
// numa_node in sysfs), not into the GPU's HBM node.
func TestGPUNUMANodeIsTheCPUSideNode(t *testing.T) {
	noCPUs := func(n int) ([]uint, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	g, err := device(fakeNVML(4, nvml.SUCCESS, noCPUs), 0) // node 4: the GPU's own HBM node
	if err != nil {
		t.Fatal(err)
	}
	sysPCI("testdata", &g)
	if g.NUMANode != 1 {
		t.Fatalf("ring pages would be placed on NUMA node %d (NVML's GPU memory node); want 1, the PCI device's node in sysfs", g.NUMANode)
	}
}

// GetCpuAffinity's size is the highest CPU id's words, not the count of
// CPUs this process may run on: runtime.NumCPU() is the latter, so a
// lastmiled confined to a few CPUs (systemd CPUAffinity=, a container's
// cpuset) asks for one word and loses every CPU above 63.
func TestGPUCPUAffinityNotTruncated(t *testing.T) {
	// the GPU's CPUs: 48-71 (word 0 bits 48-63, word 1 bits 0-7)
	words := []uint{0xffff << 48, 0xff}
	cpu := func(n int) ([]uint, nvml.Return) {
		if n > len(words) {
			n = len(words)
		}
		return append([]uint(nil), words[:n]...), nvml.SUCCESS
	}
	g, err := device(fakeNVML(0, nvml.ERROR_NOT_SUPPORTED, cpu), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := CPUList(g.CPUs); got != "48-71" {
		t.Fatalf("GPU CPUs %q, want 48-71", got)
	}
}

// TestInventoryKeepsALostGPU: one GPU that NVML cannot read (fallen off
// the bus) made the whole inventory fail, so the daemon placed no rank
// on any GPU and staging fell back for all of them. It is now listed with
// its index and error; the other ranks stay placed, and the rank mapped to
// it is left unplaced saying why.
func TestInventoryKeepsALostGPU(t *testing.T) {
	good := fakeNVML(-1, nvml.ERROR_NOT_SUPPORTED, func(n int) ([]uint, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED })
	lib := &mock.Interface{
		DeviceGetCountFunc: func() (int, nvml.Return) { return 2, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i == 1 {
				return nil, nvml.ERROR_GPU_IS_LOST
			}
			return good.DeviceGetHandleByIndex(i)
		},
		ErrorStringFunc: func(r nvml.Return) string {
			if r == nvml.ERROR_GPU_IS_LOST {
				return "GPU is lost"
			}
			return "err"
		},
	}
	gpus, err := inventory(lib, Config{SysRoot: t.TempDir()})
	if err != nil {
		t.Fatalf("one lost GPU failed the inventory: %v", err)
	}
	if len(gpus) != 2 || gpus[0].Err != "" || gpus[0].UUID != "GPU-0000" || gpus[1].Index != 1 || !strings.Contains(gpus[1].Err, "GPU is lost") {
		t.Fatalf("inventory %+v: want GPU 0 read and GPU 1 with its error", gpus)
	}
	ps, err := MapRanks(2, nil, "", gpus)
	if err != nil {
		t.Fatal(err)
	}
	if ps[0].GPU != 0 || ps[1].GPU != -1 || !strings.Contains(ps[1].Why, "GPU is lost") {
		t.Fatalf("placements %+v: want rank 0 on GPU 0, rank 1 unplaced saying the GPU is lost", ps)
	}
}
