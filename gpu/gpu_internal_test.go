package gpu

import (
	"slices"
	"testing"
)

func TestSysPCI(t *testing.T) {
	g := GPU{PCIBusID: "0000:3B:00.0", NUMANode: -1}
	sysPCI("testdata", &g)
	if g.NUMANode != 1 || CPUList(g.CPUs) != "24-47,72-95" {
		t.Fatalf("from the fake sysfs: node %d, CPUs %s; want 1, 24-47,72-95", g.NUMANode, CPUList(g.CPUs))
	}
	// What NVML said wins.
	g = GPU{PCIBusID: "0000:3b:00.0", NUMANode: 0, CPUs: []int{0, 1}}
	sysPCI("testdata", &g)
	if g.NUMANode != 0 || !slices.Equal(g.CPUs, []int{0, 1}) {
		t.Fatalf("sysfs overrode NVML: %+v", g)
	}
	g = GPU{PCIBusID: "0000:99:00.0", NUMANode: -1}
	sysPCI("testdata", &g)
	if g.NUMANode != -1 || g.CPUs != nil {
		t.Fatalf("a device missing from sysfs got %+v", g)
	}
}

func TestMaskCPUs(t *testing.T) {
	got := maskCPUs([]uint{0b1011, 1 << 63, 1})
	if want := []int{0, 1, 3, 127, 128}; !slices.Equal(got, want) {
		t.Fatalf("maskCPUs = %v, want %v", got, want)
	}
}
