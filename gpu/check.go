package gpu

import (
	"context"
	"errors"
	"fmt"

	"github.com/lastmile/lastmile/cuda"
	"github.com/lastmile/lastmile/shm"
)

// CheckConfig tunes the self-test.
type CheckConfig struct {
	CUDA cuda.Config
	NVML Config
	// Sizes are the copy sizes in bytes; default 1, 8 and 64 MiB.
	Sizes []int64
	// Iters is the copies timed per measurement (default 20), after 2
	// untimed ones.
	Iters int
	// Rounds is how often the registered ring and the pinned reference
	// are measured, alternately (default 5); each keeps its fastest. One
	// round of each, back to back, read 0.89x on an H100 where five
	// alternating rounds read 0.98-1.00x in five runs.
	Rounds int
	// Dir is where the test rings are made; default shm.DefaultDir().
	Dir string
}

// Measurement is one host-to-device bandwidth figure.
type Measurement struct {
	CUDADevice int    `json:"cuda_device"`
	Source     string `json:"source"`    // one of the Src* constants
	NUMANode   int    `json:"numa_node"` // node of the host pages, -1 unknown
	Bytes      int64  `json:"bytes"`
	// GBps is bytes × copies over the wall time from the first queued copy
	// to the stream's completion, in 10^9 bytes per second: what a
	// trainer waiting for its batch sees.
	GBps float64 `json:"gb_per_s"`
}

// Sources of a Measurement.
const (
	SrcRegistered = "ring slot, registered in place"
	SrcPageable   = "ring slot, pageable"
	SrcPinned     = "cuMemAllocHost (pinned reference)"
	SrcRemote     = "ring slot, registered, NUMA-remote"
)

// Item is one check of the self-test and its verdict.
type Item struct {
	Name   string `json:"name"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail"`
}

// Report is the self-test's result.
type Report struct {
	// NoGPU, when not "", says plainly that this host has no GPU or no
	// driver, and why; nothing was measured.
	NoGPU string `json:"no_gpu,omitempty"`
	// Inventory names where GPUs came from: "nvml", or "cuda" when NVML is
	// missing but the driver works.
	Inventory    string        `json:"inventory,omitempty"`
	GPUs         []GPU         `json:"gpus"`
	Driver       int           `json:"driver_version,omitempty"`
	Measurements []Measurement `json:"measurements"`
	Checks       []Item        `json:"checks"`
}

// Passed reports whether there was a GPU and every check passed.
func (r *Report) Passed() bool {
	if r.NoGPU != "" {
		return false
	}
	for _, c := range r.Checks {
		if !c.Pass {
			return false
		}
	}
	return true
}

func (r *Report) check(pass bool, name, detail string) {
	r.Checks = append(r.Checks, Item{Name: name, Pass: pass, Detail: detail})
}

// RegisteredRatio is the least registered-ring bandwidth, as a share of
// the pinned reference at the same size, that the self-test passes.
const RegisteredRatio = 0.9

// Check runs the self-test: it lists the GPUs with their NUMA nodes,
// then for each CUDA device measures host-to-device bandwidth at each
// size from a ring slot made on the GPU's node (pageable, then registered
// in place), from cuMemAllocHost memory, and, where the host has two
// NUMA nodes, from a ring made on another node. A host without a GPU or a
// driver gets a Report with NoGPU set, not an error.
func Check(ctx context.Context, cfg CheckConfig) (*Report, error) {
	if len(cfg.Sizes) == 0 {
		cfg.Sizes = []int64{1 << 20, 8 << 20, 64 << 20}
	}
	if cfg.Iters <= 0 {
		cfg.Iters = 20
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 5
	}
	if cfg.Dir == "" {
		cfg.Dir = shm.DefaultDir()
	}
	r := &Report{Measurements: []Measurement{}, Checks: []Item{}}
	inv, nvmlErr := Inventory(cfg.NVML)
	d, err := cuda.Open(cfg.CUDA)
	if err != nil {
		if !cuda.NoDriver(err) {
			return nil, err
		}
		r.NoGPU = fmt.Sprintf("no GPU or driver found: %v", err)
		if nvmlErr != nil {
			r.NoGPU += fmt.Sprintf("; NVML: %v", nvmlErr)
		}
		r.GPUs = append([]GPU{}, inv...)
		return r, nil
	}
	r.Driver, _ = d.Version()
	n, err := d.DeviceCount()
	if err != nil {
		return nil, err
	}
	r.check(n > 0, "CUDA driver", fmt.Sprintf("%s, version %d, %d devices", d.Path(), r.Driver, n))
	if nvmlErr == nil {
		r.Inventory, r.GPUs = "nvml", inv
		r.check(len(inv) == n, "NVML inventory", fmt.Sprintf("%d GPUs (CUDA sees %d)", len(inv), n))
	} else {
		r.Inventory = "cuda"
		r.check(false, "NVML inventory", fmt.Sprintf("%v: NUMA nodes from sysfs only, placement off", nvmlErr))
	}
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		g, err := cudaGPU(d, i, r, cfg.NVML.SysRoot)
		if err != nil {
			return r, err
		}
		if err := checkDevice(ctx, d, i, g, cfg, r); err != nil {
			return r, err
		}
	}
	return r, nil
}

// cudaGPU finds CUDA device i in the inventory by PCI bus id (CUDA and
// NVML may number devices differently), adding it from the driver when
// NVML is missing.
func cudaGPU(d *cuda.Driver, i int, r *Report, sysRoot string) (GPU, error) {
	info, err := d.Info(i)
	if err != nil {
		return GPU{}, err
	}
	for _, g := range r.GPUs {
		if g.PCIBusID == NormalizeBusID(info.PCIBusID) {
			return g, nil
		}
	}
	g := GPU{Index: i, Name: info.Name, Memory: info.Memory, PCIBusID: NormalizeBusID(info.PCIBusID), NUMANode: -1}
	sysPCI(sysRoot, &g)
	if r.Inventory == "cuda" {
		r.GPUs = append(r.GPUs, g)
	}
	return g, nil
}

// checkDevice measures one CUDA device.
func checkDevice(ctx context.Context, d *cuda.Driver, i int, g GPU, cfg CheckConfig, r *Report) (err error) {
	dev, err := d.Device(i)
	if err != nil {
		return err
	}
	c, err := d.Retain(dev)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.Release()) }()
	maxSize := cfg.Sizes[0]
	for _, s := range cfg.Sizes {
		maxSize = max(maxSize, s)
	}
	b := &bench{c: c, dev: i, iters: cfg.Iters, sizes: cfg.Sizes, r: r}
	if b.dst, err = c.Alloc(maxSize); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.dst.Free()) }()
	if b.s, err = c.NewStream(cuda.StreamNonBlocking); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.s.Destroy()) }()

	name := fmt.Sprintf("gpu %d (%s, node %d)", i, g.PCIBusID, g.NUMANode)
	ring, err := newTestRing(cfg.Dir, g.NUMANode, maxSize)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, ring.close()) }()
	if g.NUMANode >= 0 {
		node, err := PageNode(ring.slot)
		r.check(err == nil && node == g.NUMANode, name+": ring pages on the GPU's NUMA node",
			fmt.Sprintf("slot 0 is on node %d (%v)", node, err))
	}
	if err := b.run(ctx, SrcPageable, ring.slot, g.NUMANode); err != nil {
		return err
	}
	if _, err := ring.m.Register(c, cuda.RegisterPortable); err != nil {
		r.check(false, name+": register a ring in place", err.Error())
		return nil
	}
	r.check(true, name+": register a ring in place", fmt.Sprintf("%d bytes at a 2 MiB boundary", len(ring.m.Bytes)))
	pinned, err := c.AllocHost(maxSize)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, pinned.Free()) }()
	// Runs first: no copy may still be queued from the host memory freed,
	// unregistered and unmapped above (a copy that failed midway left the
	// earlier ones queued), as DeviceRing.Close waits before it lets go.
	defer func() { err = errors.Join(err, b.s.Synchronize()) }()
	// alternate the two sides of the comparison; each keeps its best round
	for range cfg.Rounds {
		if err := b.run(ctx, SrcRegistered, ring.slot, g.NUMANode); err != nil {
			return err
		}
		if err := b.run(ctx, SrcPinned, pinned.Bytes, -1); err != nil {
			return err
		}
	}
	b.compare(name)
	return b.remote(ctx, name, cfg.Dir, g.NUMANode, maxSize)
}
