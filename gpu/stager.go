package gpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/lastmile/lastmile/cuda"
	"github.com/lastmile/lastmile/shm"
)

// Stager is device staging for one run of a job (docs/gpu.md, "device"):
// per rank, a DeviceRing on the rank's GPU, opened at the rank's first
// batch, announced in its ring, and fed every packed slot before it is
// published. Its Stage method is the engine's Options.Stage hook.
//
// Protocol, per rank (the engine calls Stage from one goroutine, in
// publish order, so a rank's state needs no lock against itself; the
// mutex guards it against Status and Close from other goroutines):
//
//  1. first batch: retain the GPU's primary context (one per GPU, shared
//     by the ranks on it), OpenDeviceRing on the ring's own descriptor,
//     then Announce the handles: all before the first publish, so the
//     trainer's first batch already sees the announcement;
//  2. every batch: DeviceRing.Stage (copy, record the slot's event, wait),
//     then the engine publishes;
//  3. any failure, at 1 or 2 (a sticky error mid-run included): withdraw
//     the announcement (an empty Announce) before this batch is
//     published, log a warning naming the rank, its ring and the error,
//     and go on in host mode: the batch is in the ring slot, as every
//     batch is, so the trainer copies it itself. The rank never returns to
//     device mode within the run.
//  4. Close, after the run: each DeviceRing frees its device slots, then
//     unregisters, then unmaps; then the contexts are released.
//
// Rejected: freeing a failed rank's DeviceRing at once. The trainer may
// still hold a batch it took before the withdrawal and read it from the
// device slot; the memory stays until the job's end, when the rings are
// finished. (A DeviceRing never announced is freed at once.)
type Stager struct {
	cfg StagerConfig

	mu    sync.Mutex
	drv   *cuda.Driver
	ctxs  map[cuda.Device]*cuda.Context
	ranks map[int]*rankStage
}

// StagerConfig is what a Stager needs.
type StagerConfig struct {
	CUDA cuda.Config
	// Placement maps ranks to GPUs (MapRanks); a rank without a GPU's
	// PCI bus id is staged by the trainer (host mode).
	Placement []Placement
	// Generation tells the trainer this daemon's handles from an earlier
	// life's (docs/ring-format.md 3.6.1).
	Generation uint64
	Log        *slog.Logger
}

// rankStage is one rank's device staging state.
type rankStage struct {
	r      *DeviceRing
	busID  string
	mode   string // "device" or "host"
	why    string
	staged uint64
	// announced: the trainer may have opened r's handles, so r lives
	// until Close even after a fallback.
	announced bool
}

// RankStaging is one rank's device staging, as status shows it.
type RankStaging struct {
	Rank     int    `json:"rank"`
	Mode     string `json:"mode"` // "device", or "host" after a fallback
	PCIBusID string `json:"pci_bus_id,omitempty"`
	Staged   uint64 `json:"staged_batches"`
	Why      string `json:"why,omitempty"` // why a rank fell back to host
}

// NewStager returns a Stager; it opens nothing until the first batch.
func NewStager(cfg StagerConfig) *Stager {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Stager{cfg: cfg, ctxs: map[cuda.Device]*cuda.Context{}, ranks: map[int]*rankStage{}}
}

// Stage stages slot s of rank's ring before the engine publishes it
// (steps 1-3). It returns an error only when ctx is done: a CUDA failure
// sends the rank to host mode instead.
func (st *Stager) Stage(ctx context.Context, rank int, ring *shm.Producer, s *shm.Slot) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	rs := st.ranks[rank]
	if rs == nil {
		rs = &rankStage{mode: "device"}
		st.ranks[rank] = rs
		if err := st.open(rank, ring, rs); err != nil {
			st.fallback(rank, ring, rs, err)
			return nil
		}
	}
	if rs.mode != "device" {
		return nil
	}
	if err := rs.r.Stage(s.Seq(), s.Used()); err != nil {
		st.fallback(rank, ring, rs, err)
		return nil
	}
	rs.staged++
	return nil
}

// open is step 1.
func (st *Stager) open(rank int, ring *shm.Producer, rs *rankStage) error {
	if rank >= len(st.cfg.Placement) || st.cfg.Placement[rank].PCIBusID == "" {
		why := "no NVML inventory, or no GPU for it"
		if rank < len(st.cfg.Placement) && st.cfg.Placement[rank].Why != "" {
			why = st.cfg.Placement[rank].Why
		}
		return fmt.Errorf("the rank is not placed on a GPU (%s): device staging needs its PCI bus id", why)
	}
	c, busID, err := st.context(st.cfg.Placement[rank].PCIBusID)
	if err != nil {
		return err
	}
	rs.busID = busID // as the driver spells it
	// The ring's own descriptor, not its name: a name in a shared
	// directory could be replaced under the daemon.
	path := fmt.Sprintf("/proc/self/fd/%d", ring.Fd())
	if rs.r, err = OpenDeviceRing(c, path, rs.busID, st.cfg.Generation); err != nil {
		return err
	}
	b, err := rs.r.Announcement()
	if err == nil {
		err = ring.Announce(b)
	}
	rs.announced = err == nil
	return err
}

// context returns the primary context of the GPU at busID, retaining it
// at its first use, and the bus id as the driver spells it.
func (st *Stager) context(busID string) (*cuda.Context, string, error) {
	if st.drv == nil {
		d, err := cuda.Open(st.cfg.CUDA)
		if err != nil {
			return nil, "", err
		}
		st.drv = d
	}
	n, err := st.drv.DeviceCount()
	if err != nil {
		return nil, "", err
	}
	for i := range n {
		info, err := st.drv.Info(i)
		if err != nil {
			return nil, "", err
		}
		if !samePCIBus(info.PCIBusID, busID) {
			continue
		}
		dev, err := st.drv.Device(i)
		if err != nil {
			return nil, "", err
		}
		if c := st.ctxs[dev]; c != nil {
			return c, info.PCIBusID, nil
		}
		// Device staging puts a context of lastmiled's beside the
		// trainer's on the GPU. In EXCLUSIVE_PROCESS mode the second
		// process's context is refused: lastmiled's, or worse, the
		// trainer's when lastmiled got there first (its CUDA init fails).
		if mode, err := st.drv.Attribute(dev, cuda.AttrComputeMode); err != nil {
			return nil, "", err
		} else if mode != cuda.ComputeModeDefault {
			return nil, "", fmt.Errorf("GPU %s is in compute mode %d (2: prohibited, 3: exclusive process): "+
				"lastmiled's context would lock the trainer out of its GPU; device staging needs the default mode (nvidia-smi -c DEFAULT)",
				info.PCIBusID, mode)
		}
		c, err := st.drv.Retain(dev)
		if err != nil {
			return nil, "", err
		}
		st.ctxs[dev] = c
		return c, info.PCIBusID, nil
	}
	return nil, "", fmt.Errorf("no CUDA device has PCI bus id %s: NVML lists it, but the driver does not show it to lastmiled (is CUDA_VISIBLE_DEVICES set in lastmiled's environment? unset it in the service unit)", busID)
}

// fallback is step 3.
func (st *Stager) fallback(rank int, ring *shm.Producer, rs *rankStage, cause error) {
	rs.mode, rs.why = "host", cause.Error()
	if rs.announced {
		if err := ring.Announce(nil); err != nil {
			cause = errors.Join(cause, fmt.Errorf("withdraw the announcement: %w", err))
		}
	} else if rs.r != nil { // never announced: no trainer can hold its device slots
		if err := rs.r.Close(); err != nil {
			cause = errors.Join(cause, fmt.Errorf("free the device slots: %w", err))
		}
		rs.r = nil
	}
	st.cfg.Log.Warn("device staging failed: the rank falls back to host staging (the trainer copies its batches itself)",
		"rank", rank, "ring", ring.Name(), "staged_batches", rs.staged, "err", cause)
}

// Status returns each rank's staging, in rank order.
func (st *Stager) Status() []RankStaging {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]RankStaging, 0, len(st.ranks))
	for r := range len(st.cfg.Placement) + len(st.ranks) {
		if rs := st.ranks[r]; rs != nil {
			out = append(out, RankStaging{Rank: r, Mode: rs.mode, PCIBusID: rs.busID, Staged: rs.staged, Why: rs.why})
		}
	}
	return out
}

// Close is step 4: it closes every DeviceRing (free, unregister, unmap),
// then releases the contexts. Call it once the run is over.
func (st *Stager) Close() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	var errs []error
	leaked := false
	for r, rs := range st.ranks {
		if rs.r != nil {
			if err := rs.r.Close(); err != nil {
				errs = append(errs, fmt.Errorf("rank %d: %w", r, err))
				leaked = leaked || errors.Is(err, errLeftInPlace)
			}
			rs.r = nil
		}
	}
	if leaked {
		// Releasing the last reference would destroy the context, and
		// with it what a ring left in place for a copy that may still
		// run: the contexts stay retained until the process ends.
		return errors.Join(errs...)
	}
	for dev, c := range st.ctxs {
		errs = append(errs, c.Release())
		delete(st.ctxs, dev)
	}
	return errors.Join(errs...)
}

// samePCIBus compares bus ids as the driver and NVML spell them (hex
// digits of either case).
func samePCIBus(a, b string) bool { return strings.EqualFold(a, b) }

// DeviceSlot returns rank's device slot k and the context it lives in
// (tests and checks: the real-GPU test reads it back); ok is false when
// the rank is not device-staged.
func (st *Stager) DeviceSlot(rank, k int) (c *cuda.Context, ptr cuda.DevicePtr, ok bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	rs := st.ranks[rank]
	if rs == nil || rs.r == nil || rs.mode != "device" {
		return nil, 0, false
	}
	ptr, _ = rs.r.DeviceSlot(k)
	return rs.r.c, ptr, true
}
