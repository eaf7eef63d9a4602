//go:build linux && cgo

package gpu

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Inventory lists the host's GPUs through NVML. Without NVML (no driver)
// it returns an error wrapping ErrNoNVML.
func Inventory(cfg Config) ([]GPU, error) {
	var opts []nvml.LibraryOption
	if cfg.NVML != "" {
		opts = append(opts, nvml.WithLibraryPath(cfg.NVML))
	}
	lib := nvml.New(opts...)
	if r := initNVML(lib); r != nvml.SUCCESS {
		if r == nvml.ERROR_LIBRARY_NOT_FOUND || r == nvml.ERROR_DRIVER_NOT_LOADED {
			return nil, fmt.Errorf("%w: %s (no NVIDIA driver on this host)", ErrNoNVML, lib.ErrorString(r))
		}
		return nil, fmt.Errorf("nvml init: %s", lib.ErrorString(r))
	}
	defer lib.Shutdown()
	return inventory(lib, cfg)
}

// inventory lists the GPUs of an initialized NVML. A GPU that NVML cannot
// read (fallen off the bus, lost) is listed with its index and Err, so
// that the others keep their indexes and their ranks stay placed.
func inventory(lib nvml.Interface, cfg Config) ([]GPU, error) {
	n, r := lib.DeviceGetCount()
	if r != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml device count: %s", lib.ErrorString(r))
	}
	gpus := make([]GPU, 0, n)
	for i := 0; i < n; i++ {
		g, err := device(lib, i)
		if err != nil {
			gpus = append(gpus, GPU{Index: i, NUMANode: -1, Err: err.Error()})
			continue
		}
		sysPCI(cfg.SysRoot, &g)
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// initNVML calls Init, turning go-nvml's panic on a missing library in
// some versions into ERROR_LIBRARY_NOT_FOUND.
func initNVML(lib nvml.Interface) (r nvml.Return) {
	defer func() {
		if recover() != nil {
			r = nvml.ERROR_LIBRARY_NOT_FOUND
		}
	}()
	return lib.Init()
}

func device(lib nvml.Interface, i int) (GPU, error) {
	g := GPU{Index: i, NUMANode: -1}
	d, r := lib.DeviceGetHandleByIndex(i)
	if r != nvml.SUCCESS {
		return g, fmt.Errorf("nvml device %d: %s", i, lib.ErrorString(r))
	}
	if g.UUID, r = d.GetUUID(); r != nvml.SUCCESS {
		return g, fmt.Errorf("nvml device %d uuid: %s", i, lib.ErrorString(r))
	}
	g.Name, _ = d.GetName()
	if m, r := d.GetMemoryInfo(); r == nvml.SUCCESS {
		g.Memory = m.Total
	}
	if p, r := d.GetPciInfo(); r == nvml.SUCCESS {
		b := make([]byte, 0, len(p.BusId))
		for _, c := range p.BusId {
			if c == 0 {
				break
			}
			b = append(b, byte(c))
		}
		g.PCIBusID = NormalizeBusID(string(b))
	}
	// Not d.GetNumaNodeId: it answers only "on platforms where the GPUs
	// are NUMA nodes" (GH200, GB200), and there it is the GPU memory's own
	// node, not the CPU node the ring's pages belong on. The PCI device's
	// numa_node in sysfs (sysPCI) is the CPU side's.
	if words, r := d.GetCpuAffinity(cpuSetWords()); r == nvml.SUCCESS {
		g.CPUs = maskCPUs(words)
	}
	return g, nil
}

// cpuSetWords is the size of a CPU bitmask that holds every CPU id the
// kernel may ever use (/sys/devices/system/cpu/possible), 64 a word: not
// runtime.NumCPU(), which counts only the CPUs this process may run on.
func cpuSetWords() int {
	n := runtime.NumCPU()
	if b, err := os.ReadFile("/sys/devices/system/cpu/possible"); err == nil {
		if cpus, err := ParseCPUList(strings.TrimSpace(string(b))); err == nil && len(cpus) > 0 {
			n = max(n, cpus[len(cpus)-1]+1)
		}
	}
	return max((n+63)/64, 16) // at least 1024 CPUs: NVML fills what it has
}
