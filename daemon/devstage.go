package daemon

import (
	"os"
	"strconv"
	"time"

	"github.com/lastmile/lastmile/cuda"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/gpu"
	"github.com/lastmile/lastmile/spec"
	"github.com/prometheus/client_golang/prometheus"
)

// Device staging (docs/gpu.md, "device"): for a job with gpu.staging:
// device, each run gets a gpu.Stager, the engine's Options.Stage hook.
// The stager never fails the job: a rank whose CUDA setup or copies fail
// goes back to host staging with a warning, and status and metrics show
// it. The device slots are freed when the run is over and its trainers
// have released every batch (or detached, or drainWait passed), since a
// trainer reads its last batches from them.

// drainWait bounds how long a finished run's device slots wait for the
// trainers to release their last batches before they are freed.
const drainWait = 30 * time.Second

// stagerFor returns the run's device stager, or nil (and Options.Stage
// stays nil) when the job does not ask for device staging.
func (j *Job) stagerFor() *gpu.Stager {
	if j.spec.GPU.Staging != spec.StagingDevice {
		return nil
	}
	st := gpu.NewStager(gpu.StagerConfig{
		CUDA:       cuda.Config{Library: j.d.Config().GPU.LibCUDA},
		Placement:  j.stagingPlacement(),
		Generation: uint64(time.Now().UnixNano())<<16 ^ uint64(os.Getpid()),
		Log:        j.log,
	})
	j.mu.Lock()
	j.stager = st
	j.mu.Unlock()
	return st
}

// stagingPlacement maps ranks to GPUs for device staging, whether or not
// the job places its rings' pages (gpu.place): the copies need the GPU.
func (j *Job) stagingPlacement() []gpu.Placement {
	n := j.local
	gpus, err := j.d.gpus()
	if err != nil {
		return gpu.Unplaced(n, "no GPU inventory: "+err.Error())
	}
	p, err := gpu.MapRanks(n, j.spec.GPU.Devices, j.spec.GPU.VisibleDevices, gpus)
	if err != nil {
		return gpu.Unplaced(n, err.Error())
	}
	return p
}

// closeStager frees a finished run's device staging once its trainers
// are done with the last batches (see drainWait).
func (j *Job) closeStager(st *gpu.Stager) {
	if st == nil {
		return
	}
	deadline := time.Now().Add(drainWait)
	for time.Now().Before(deadline) && !j.ringsReleased() {
		time.Sleep(50 * time.Millisecond)
	}
	if err := st.Close(); err != nil {
		j.log.Warn("device staging: freeing the device slots", "err", err)
	}
}

// ringsReleased says whether every ring's trainer released every batch, or
// has gone.
func (j *Job) ringsReleased() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, o := range j.obs {
		if o == nil {
			continue
		}
		if in := o.Info(); in.Head != in.Tail && in.ConsumerAttached {
			return false
		}
	}
	return true
}

// stagingView is the job's device staging per rank, for status.
func (j *Job) stagingView() []gpu.RankStaging {
	j.mu.Lock()
	st := j.stager
	j.mu.Unlock()
	if st == nil {
		return nil
	}
	return st.Status()
}

var _ engine.Stager = (*gpu.Stager)(nil)

var descRankStaging = prometheus.NewDesc("lastmile_rank_device_staging",
	"For a job with gpu.staging: device, per rank: 1 while the daemon stages its batches on the GPU, 0 once it fell back to host staging (the log says why).",
	[]string{"job", "job_id", "rank"}, nil)

var descRankStaged = prometheus.NewDesc("lastmile_rank_device_staged_batches",
	"Batches the daemon copied to the rank's device slots in the current run.",
	[]string{"job", "job_id", "rank"}, nil)

// stagingCollector exports the jobs' device staging.
type stagingCollector struct{ d *Daemon }

func (c stagingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRankStaging
	ch <- descRankStaged
}

func (c stagingCollector) Collect(ch chan<- prometheus.Metric) {
	for _, j := range c.d.jobsSnapshot() {
		for _, s := range j.stagingView() {
			up := 0.0
			if s.Mode == "device" {
				up = 1
			}
			rank := strconv.Itoa(s.Rank)
			ch <- prometheus.MustNewConstMetric(descRankStaging, prometheus.GaugeValue, up, j.name, j.id, rank)
			ch <- prometheus.MustNewConstMetric(descRankStaged, prometheus.CounterValue, float64(s.Staged), j.name, j.id, rank)
		}
	}
}
