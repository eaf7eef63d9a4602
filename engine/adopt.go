package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/lastmile/lastmile/cpus"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/ops"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// Continuing rings across runs
//
// A daemon restarts production (after its own crash, or when a trainer
// resumes from an older cursor) without disturbing the trainers that read
// on: the new Run continues the old rings instead of replacing them.
//
// createRings gets its rings from shm.Take, which is shm.Create unless
// this process holds a claim on the ring's name: then it adopts that ring
// (same file, generation and head; production continues at its tail). A
// caller that never claims sees no difference. Claims come from
//
//   - shm.Claim, by a daemon that starts and finds the rings of its
//     unfinished jobs (their producer, the daemon's previous life, is dead);
//   - Progress.DetachRings, by a daemon stopping a running Run: the rings
//     are handed over before the Run's context is canceled, so the Run's
//     final Fail("job canceled") reaches nothing, and the lock never drops.
//
// Each rank must then resume right after its ring's last published batch:
// the caller passes Options.Resume[r] = NextCursor(info.Last) (or the
// cursor the ring started at, when it has none). A rank whose ring must
// start afresh (its trainer wants an older batch) is simply not claimed,
// or Unclaimed: Take creates a new ring with a new generation.

// NextCursor returns the cursor of the batch after c: (e, i+1), or
// (e+1, 0) when c was the last batch of its epoch for its rank.
func NextCursor(c shm.Cursor) Cursor {
	if c.Flags&shm.FlagLastInEpoch != 0 {
		return Cursor{Epoch: c.Epoch + 1}
	}
	return Cursor{Epoch: c.Epoch, Batch: c.BatchIndex + 1}
}

// RingCursor converts a ring's cursor (the batch itself) to a Cursor.
func RingCursor(c shm.Cursor) Cursor { return Cursor{Epoch: c.Epoch, Batch: c.BatchIndex} }

// DetachRings hands every ring of the Run that reports to p over to the
// next Run in this process (shm.Producer.Detach): from then on nothing the
// Run does reaches the rings, and the producer locks stay held, so their
// consumers notice nothing. It returns each rank's ring state at the
// hand-over. The caller then cancels the Run's context and waits for it.
// It fails if the Run has not created its rings yet, or already closed
// them (the run ended); rings detached before the failure stay claimed.
func (p *Progress) DetachRings() ([]shm.RingInfo, error) {
	p.mu.Lock()
	rings := p.rings
	p.mu.Unlock()
	if rings == nil {
		return nil, errors.New("detach rings: the run has no rings yet")
	}
	out := make([]shm.RingInfo, len(rings))
	for i, r := range rings {
		info, err := r.Detach()
		if err != nil {
			return out[:i], fmt.Errorf("detach rings: rank %d: %w", i, err)
		}
		out[i] = info
	}
	return out, nil
}

// FailRings ends the stream of every ring of the Run that reports to p with
// an error message and closes them. It is for a caller that recovered a
// panic out of Run, which left its rings open: call it only once Run has
// returned (or panicked).
func (p *Progress) FailRings(msg string) {
	p.mu.Lock()
	rings := p.rings
	p.mu.Unlock()
	for _, r := range rings {
		r.Fail(msg)
	}
}

// Footprint is what a job will hold in memory while it runs.
type Footprint struct {
	Rings     int   // rings (ranks)
	Slots     int   // slots per ring
	SlotSize  int64 // bytes per slot, rounded as the ring will round it
	RingBytes int64 // all rings' files
	// InFlight is the number of decoded units that may wait for the
	// batcher, and UnitBytes an estimate of the largest one's decoded size.
	InFlight  int
	UnitBytes int64
	Rows      int64 // rows per epoch
	Units     int   // units per epoch
	// CacheBytes is the job's unit cache bound (cache.max_memory).
	CacheBytes int64
	Files      []string // the input files the job reads
}

// Bytes returns the total: the rings, the in-flight units and the unit
// cache.
func (f Footprint) Bytes() int64 { return f.RingBytes + int64(f.InFlight)*f.UnitBytes + f.CacheBytes }

// EstimateFootprint plans job through fsys (nil: decode.OSFS), reading
// every input file's footer and every side table's, and returns its memory
// footprint, computed as Run will size its rings. Every file the job will
// read is thus opened through fsys before it is accepted: a refusal is an
// error wrapping fs.ErrPermission.
func EstimateFootprint(ctx context.Context, job *spec.Job, fsys decode.FS) (Footprint, error) {
	paths, _, err := inputFiles(ctx, job, fsys)
	var plan *decode.Plan
	if err == nil {
		plan, err = decode.PlanFiles(ctx, paths, decode.PlanOptions{Columns: job.Columns, MaxUnitRows: job.Decode.MaxUnitRows, FS: fsys})
	}
	if err != nil {
		return Footprint{}, fmt.Errorf("plan job %q: %w", job.Name, err)
	}
	for _, op := range job.Pipeline {
		if op.Kind != "join" {
			continue
		}
		// Footers only: the pipeline's compile checks the columns.
		if _, err := ops.PlanTable(ctx, fsys, op.Join.Table, nil); err != nil {
			return Footprint{}, fmt.Errorf("job %q: %s.table: %w", job.Name, op.Path, err)
		}
	}
	size := int64(job.Ring.SlotSize)
	if size == 0 {
		size = slotSize(plan, packFields(planFields(plan), nil), job.Batch.Size)
	}
	size = shm.RoundSlotSize(size)
	workers := job.Decode.Workers
	if workers == 0 {
		workers = cpus.Available()
	}
	inflight := job.Decode.InFlight
	if inflight == 0 {
		inflight = 2 * workers
	}
	var maxRows int64
	for _, u := range plan.Units {
		maxRows = max(maxRows, u.Rows)
	}
	perRow := slotSize(plan, packFields(planFields(plan), nil), 1024) / 1024
	files := make([]string, len(plan.Files))
	for i, f := range plan.Files {
		files[i] = f.Path
	}
	// The header, schema block and alignment before slot 0: at most 2 MiB
	// plus the schema (96 bytes per field).
	header := int64(2<<20) + int64(96*len(plan.Fields))
	return Footprint{
		Rings: job.WorldSize, Slots: job.Ring.Slots, SlotSize: size,
		RingBytes: int64(job.WorldSize) * (header + int64(job.Ring.Slots)*size),
		InFlight:  inflight, UnitBytes: maxRows * max(perRow, 1),
		Rows: plan.Rows, Units: len(plan.Units), Files: files,
	}, nil
}
