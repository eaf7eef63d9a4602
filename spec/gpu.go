package spec

import (
	"fmt"
	"strings"
)

// GPU is the gpu section: how a job's batches reach its trainers' GPUs
// and where its rings are placed (docs/gpu.md).
type GPU struct {
	// Staging is how a batch gets from its ring slot to device memory:
	// "host" (the trainer registers its mapping of the ring with CUDA
	// and copies each batch asynchronously), "device" (the daemon copies
	// into device memory it shares with the trainer), "off" (the trainer
	// gets host tensors, as before), or "" for host where the trainer has
	// a GPU and off where it has none.
	Staging string `yaml:"staging"`
	// Devices maps ranks to GPUs explicitly: entry r is rank r's GPU, an
	// NVML index ("3") or a UUID or its prefix ("GPU-5c1f"). Empty: the
	// job's local rank r uses the r-th device of VisibleDevices, or GPU r.
	Devices []string `yaml:"devices"`
	// VisibleDevices is the trainers' CUDA_VISIBLE_DEVICES, as lastmile
	// submit or the Python client pass it ("" when unset).
	VisibleDevices string `yaml:"visible_devices"`
	// Place binds each rank's ring pages to its GPU's NUMA node when the
	// ring is created (default true; it needs NVML).
	Place *bool `yaml:"place"`
}

// Staging modes.
const (
	StagingAuto   = ""
	StagingHost   = "host"
	StagingDevice = "device"
	StagingOff    = "off"
)

// Placed reports whether ring pages are bound to the GPUs' NUMA nodes.
func (g GPU) Placed() bool { return g.Place == nil || *g.Place }

func (j *Job) validateGPU(d *Decoder) {
	g := &j.GPU
	switch g.Staging {
	case StagingAuto, StagingHost, StagingDevice, StagingOff:
	default:
		d.Errorf(nil, "gpu.staging", "want host, device or off, got %q", g.Staging)
	}
	// One per rank, or, for a world on several hosts, one per rank of a
	// host: the daemon checks the list against the ranks it serves.
	if n := len(g.Devices); n > 0 && (n > j.WorldSize || j.WorldSize%n != 0) {
		d.Errorf(nil, "gpu.devices", "lists %d GPUs for world_size %d: give one per rank (one per rank of a host, for a world on several hosts), or none", n, j.WorldSize)
	}
	for i, dev := range g.Devices {
		if strings.TrimSpace(dev) == "" || len(dev) > 96 {
			d.Errorf(nil, fmt.Sprintf("gpu.devices[%d]", i), "want an NVML index such as 3 or a GPU UUID such as GPU-5c1f..., got %q", dev)
		}
	}
	if len(g.VisibleDevices) > 4096 {
		d.Errorf(nil, "gpu.visible_devices", "longer than 4096 bytes")
	}
}
