package gpu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// GPU is one device of the host, as NVML numbers it (NVML indexes follow
// PCI bus order, as CUDA's do with CUDA_DEVICE_ORDER=PCI_BUS_ID).
type GPU struct {
	Index    int    `json:"index"`
	UUID     string `json:"uuid"`
	Name     string `json:"name"`
	Memory   uint64 `json:"memory_bytes"`
	PCIBusID string `json:"pci_bus_id"` // "0000:3b:00.0"
	// NUMANode is the node of the GPU's PCI root, -1 when the host has no
	// NUMA information for it.
	NUMANode int `json:"numa_node"`
	// CPUs are the CPUs close to the GPU (NVML's CPU affinity, or the
	// PCI device's local_cpulist in sysfs).
	CPUs []int `json:"cpus"`
	// Err says why NVML could not read this GPU (it may have fallen off
	// the bus): no rank is placed on it. Empty for a GPU read whole.
	Err string `json:"error,omitempty"`
}

// ErrNoNVML is Inventory's error when NVML cannot be used: the library is
// missing (no NVIDIA driver), or this build has no cgo.
var ErrNoNVML = errors.New("NVML unavailable")

// NoGPU reports whether err says this host has no usable GPU inventory,
// the case where GPU features switch themselves off.
func NoGPU(err error) bool { return errors.Is(err, ErrNoNVML) }

// Config tunes Inventory.
type Config struct {
	// NVML is the path of libnvidia-ml.so.1; "" is the linker's search.
	NVML string
	// SysRoot is where /sys is; "" is "/". Tests point it at a fake tree.
	SysRoot string
}

// sysPCI fills in what NVML left unknown (-1 node, no CPUs) from sysfs:
// /sys/bus/pci/devices/BUSID/numa_node and local_cpulist.
func sysPCI(root string, g *GPU) {
	if root == "" {
		root = "/"
	}
	dir := filepath.Join(root, "sys/bus/pci/devices", strings.ToLower(g.PCIBusID))
	if g.NUMANode < 0 {
		if b, err := os.ReadFile(filepath.Join(dir, "numa_node")); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n >= 0 {
				g.NUMANode = n
			}
		}
	}
	if len(g.CPUs) == 0 {
		if b, err := os.ReadFile(filepath.Join(dir, "local_cpulist")); err == nil {
			g.CPUs, _ = ParseCPUList(strings.TrimSpace(string(b)))
		}
	}
}

// NormalizeBusID turns NVML's "00000000:3B:00.0" into sysfs's and CUDA's
// "0000:3b:00.0".
func NormalizeBusID(s string) string {
	s = strings.ToLower(strings.TrimRight(s, "\x00"))
	if dom, rest, ok := strings.Cut(s, ":"); ok && len(dom) > 4 {
		s = dom[len(dom)-4:] + ":" + rest
	}
	return s
}

// ParseCPUList parses a Linux CPU list such as "0-3,8,10-11".
func ParseCPUList(s string) ([]int, error) {
	var cpus []int
	if s == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("CPU list %q: bad entry %q", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b-a > 1<<16 {
				return nil, fmt.Errorf("CPU list %q: bad range %q", s, part)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// CPUList formats CPUs (sorted ascending) as a Linux CPU list.
func CPUList(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}

// maskCPUs turns NVML's affinity bitmask (64 CPUs per word) into CPUs.
func maskCPUs(words []uint) []int {
	var cpus []int
	for w, bits := range words {
		for b := 0; b < 64; b++ {
			if uint64(bits)>>b&1 == 1 {
				cpus = append(cpus, w*64+b)
			}
		}
	}
	return cpus
}
