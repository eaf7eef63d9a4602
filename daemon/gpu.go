package daemon

import (
	"errors"
	"strconv"
	"sync"

	"github.com/lastmile/lastmile/cuda"
	"github.com/lastmile/lastmile/gpu"
	"github.com/lastmile/lastmile/spec"
	"github.com/prometheus/client_golang/prometheus"
)

// GPUConfig is the gpu section of lastmiled's config (docs/gpu.md).
type GPUConfig struct {
	// NVML is the path of libnvidia-ml.so.1; "" is the dynamic linker's
	// search.
	NVML string `yaml:"nvml"`
	// LibCUDA is the path of libcuda.so.1 for device staging; "" is
	// $LASTMILE_LIBCUDA, else the dynamic linker's search.
	LibCUDA string `yaml:"libcuda"`
	// Inventory, if not nil, replaces NVML (tests).
	Inventory func() ([]gpu.GPU, error) `yaml:"-"`
}

// gpuInventory is the host's GPUs, read once, at the first job that asks:
// GPUs do not come and go under a running daemon.
type gpuInventory struct {
	once sync.Once
	gpus []gpu.GPU
	err  error
}

// gpus returns the host's GPUs. Without an inventory (no NVML: no driver,
// or a build without cgo) it warns once and returns the error; every job
// then runs with its rings unplaced.
func (d *Daemon) gpus() ([]gpu.GPU, error) {
	inv := &d.gpuInv
	inv.once.Do(func() {
		cfg := d.Config().GPU
		if cfg.Inventory != nil {
			inv.gpus, inv.err = cfg.Inventory()
		} else {
			inv.gpus, inv.err = gpu.Inventory(gpu.Config{NVML: cfg.NVML})
		}
		switch {
		case inv.err != nil:
			d.log.Warn("no GPU inventory: ring pages are not placed on GPUs' NUMA nodes (this warning is not repeated)", "err", inv.err)
		case len(inv.gpus) == 0:
			inv.err = errors.New("NVML lists no GPU")
			d.log.Warn("no GPU on this host: ring pages are not placed (this warning is not repeated)")
		default:
			d.log.Info("GPUs found", "count", len(inv.gpus))
			for _, g := range inv.gpus {
				if g.Err != "" {
					d.log.Warn("a GPU cannot be read by NVML: no rank is placed on it; check it with nvidia-smi", "gpu", g.Index, "err", g.Err)
				}
			}
			if err := cuda.PinnableDir(d.Config().ShmDir); err != nil {
				// staging falls back, rank by rank; say why once, here
				d.log.Warn("rings cannot be registered with CUDA: host and device staging will fall back to copies from pageable memory (this warning is not repeated)", "err", err)
			}
		}
	})
	return inv.gpus, inv.err
}

// placeRanks maps the job's ranks to GPUs and their NUMA nodes. It never
// fails the job: a rank it cannot place is left unplaced, with the reason,
// and the reason is logged.
func (j *Job) placeRanks() []gpu.Placement {
	n := j.local
	if !j.spec.GPU.Placed() {
		return gpu.Unplaced(n, "gpu.place is false")
	}
	gpus, err := j.d.gpus()
	if err != nil {
		return gpu.Unplaced(n, "no GPU inventory: "+err.Error())
	}
	p, err := gpu.MapRanks(n, j.spec.GPU.Devices, j.spec.GPU.VisibleDevices, gpus)
	if err != nil {
		j.log.Warn("GPU placement: rings are not placed", "err", err)
		return gpu.Unplaced(n, err.Error())
	}
	for _, r := range p {
		if r.GPU < 0 {
			j.log.Warn("GPU placement: rank not placed", "rank", r.Rank, "why", r.Why)
		}
	}
	return p
}

// placeRing returns engine.Options.PlaceRing for a run: each rank's ring
// is created under a memory policy preferring its GPU's NUMA node, and
// placement records where the rank went (for status and metrics). A
// policy the kernel refuses leaves that ring unplaced, with a warning.
func (j *Job) placeRing() func(rank int, create func() error) error {
	p := j.placeRanks()
	j.mu.Lock()
	j.placement = p
	j.mu.Unlock()
	return func(rank int, create func() error) error {
		if rank >= len(p) || p[rank].NUMANode < 0 {
			return create()
		}
		err := gpu.OnNode(p[rank].NUMANode, create)
		if errors.Is(err, gpu.ErrPolicy) {
			j.log.Warn("GPU placement: could not bind the ring's pages; creating it unplaced", "rank", rank, "err", err)
			j.mu.Lock()
			j.placement[rank].NUMANode, j.placement[rank].Why = -1, err.Error()
			j.mu.Unlock()
			return create()
		}
		return err
	}
}

// gpuView is the job's gpu section as the API shows it.
type gpuView struct {
	// Staging is the job's gpu.staging, "auto" when the spec leaves it
	// to the trainer (host where it has a GPU).
	Staging   string          `json:"staging"`
	Placement []gpu.Placement `json:"placement"`
	// Device is, with staging: device, each rank's device staging in the
	// current run: "device", or "host" after a fallback, with why.
	Device []gpu.RankStaging `json:"device_staging,omitempty"`
}

func (j *Job) gpuView() *gpuView {
	st := j.spec.GPU.Staging
	if st == spec.StagingAuto {
		st = "auto"
	}
	dev := j.stagingView()
	j.mu.Lock()
	defer j.mu.Unlock()
	return &gpuView{Staging: st, Placement: append([]gpu.Placement{}, j.placement...), Device: dev}
}

var descRankGPU = prometheus.NewDesc("lastmile_rank_gpu_info",
	"1 for each placed rank: the GPU (NVML index, UUID) it was mapped to and the NUMA node its ring's pages were allocated on.",
	[]string{"job", "job_id", "rank", "gpu", "uuid", "numa_node"}, nil)

// gpuCollector exports the jobs' GPU placement.
type gpuCollector struct{ d *Daemon }

func (c gpuCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descRankGPU }

func (c gpuCollector) Collect(ch chan<- prometheus.Metric) {
	for _, j := range c.d.jobsSnapshot() {
		for _, p := range j.gpuView().Placement {
			if p.GPU < 0 {
				continue
			}
			ch <- prometheus.MustNewConstMetric(descRankGPU, prometheus.GaugeValue, 1, j.name, j.id,
				strconv.Itoa(p.Rank), strconv.Itoa(p.GPU), p.UUID, strconv.Itoa(p.NUMANode))
		}
	}
}
