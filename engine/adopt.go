package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/lastmile/lastmile/column"

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
	// ShuffleBytes is the shuffle window (shuffle.buffer rows: the rows
	// it copies and its index, window.go), SideBytes the joins' side
	// tables (their decoded size, at most each join's max_memory).
	ShuffleBytes int64
	SideBytes    int64
	// ArenaBytes is the unit arena's file (ring.arena, arena.go): shared
	// memory, like the rings, outside the Go heap.
	ArenaBytes int64
	arena      *arenaLayout // nil: the run makes no arena
	Files      []string     // the input files the job reads
	// PlanDigest identifies the units the plan deals out (PlanDigest).
	PlanDigest string
}

// Bytes returns the total: the rings, the unit arena, the in-flight
// units, the shuffle window, the unit cache and the side tables.
func (f Footprint) Bytes() int64 {
	return min(bounded(f.RingBytes)+bounded(f.ArenaBytes)+f.heapBytes(), maxFootprint)
}

// heapBytes is the part of Bytes in the Go heap: all but the rings and
// the arena, which are shared memory.
func (f Footprint) heapBytes() int64 {
	units := int64(maxFootprint)
	if u := bounded(f.UnitBytes); f.InFlight >= 0 && (u == 0 || int64(f.InFlight) <= maxFootprint/u) {
		units = int64(f.InFlight) * u
	}
	return min(units+bounded(f.ShuffleBytes)+bounded(f.CacheBytes)+bounded(f.SideBytes), maxFootprint)
}

// maxFootprint bounds each part of a footprint and their sum. The parts
// are estimated from the input files' footers, which are the submitter's
// word: a file that claims absurd value counts must make a job that needs
// too much memory, never one whose need wraps to little or less than
// nothing and so passes every limit.
const maxFootprint = 1 << 56

// Implausible reports whether a part of f, or their sum, reached the
// bound that estimates from absurd footers saturate at: no real job
// needs 2^56 bytes, and its files' footers claim sizes no row group holds.
func (f Footprint) Implausible() bool { return f.Bytes() >= maxFootprint }

// mulBounded is a × b for a, b ≥ 0, or maxFootprint past it.
func mulBounded(a, b int64) int64 {
	a, b = bounded(a), bounded(b)
	if b != 0 && a > maxFootprint/b {
		return maxFootprint
	}
	return a * b
}

// bounded is n as a footprint part: a negative n wrapped, and counts as
// the most.
func bounded(n int64) int64 {
	if n < 0 || n > maxFootprint {
		return maxFootprint
	}
	return n
}

// ForRanks is f for a run that makes the rings of n of the job's ranks
// only: one host's share of a world on several (Options.Hosts).
func (f Footprint) ForRanks(n int) Footprint {
	if f.Rings > 0 {
		f.RingBytes = f.RingBytes / int64(f.Rings) * int64(n)
	}
	if f.arena != nil {
		f.ArenaBytes = f.arena.footprint(n) // chunks for n rings' batches
	}
	f.Rings = n
	return f
}

// ArenaFor is the unit arena's file (ArenaBytes) for a run that makes
// rings rings with inflight decoded units in flight (decode.inflight, or
// 2 per worker): what f charges for the job run at another size. 0 when
// the job makes no arena.
func (f Footprint) ArenaFor(rings, inflight int) int64 {
	if f.arena == nil {
		return 0
	}
	l := *f.arena
	l.inflight = inflight
	return l.footprint(rings)
}

// RuntimeOverhead is what a producing process holds beyond its jobs'
// footprints: the binary, goroutine stacks, decoders' page buffers, the
// garbage collector's slack under its memory limit. The Go heap gets
// heapOverhead of it; the rest is the binary's text and data, page
// tables and what the Go runtime does not count.
const (
	RuntimeOverhead = 150 << 20
	heapOverhead    = 80 << 20
)

// HeapLimit is the Go soft memory limit (runtime/debug.SetMemoryLimit)
// for a process producing jobs of these footprints: their heap part (all
// but the rings, which are shared memory outside the Go heap) plus the
// heap's share of RuntimeOverhead. Without it the collector lets the heap grow to twice
// what is live (GOGC=100), and the peak of a run sits hundreds of MB above
// what its buffers need (docs/benchmarks.md, "Memory"). With it, a run's
// peak RSS stays within its footprint plus RuntimeOverhead.
func HeapLimit(fps ...Footprint) int64 {
	n := int64(heapOverhead)
	for _, f := range fps {
		n = min(n+f.heapBytes(), maxFootprint)
	}
	return n
}

// EstimateFootprint plans job through fsys (nil: decode.OSFS), reading
// every input file's footer and every side table's, and returns its memory
// footprint, computed as Run will size its rings. Every file the job will
// read is thus opened through fsys before it is accepted: a refusal is an
// error wrapping fs.ErrPermission. Files its filters exclude by their
// partition directories are neither read nor opened (admittedFiles).
func EstimateFootprint(ctx context.Context, job *spec.Job, fsys decode.FS) (Footprint, error) {
	in, err := admittedFiles(ctx, job, fsys)
	var plan *decode.Plan
	if err == nil {
		plan, err = decode.PlanFiles(ctx, in.paths, in.options(PlanOptions(job, fsys)))
	}
	if err != nil {
		return Footprint{}, fmt.Errorf("plan job %q: %w", job.Name, err)
	}
	var side int64
	for _, op := range job.Pipeline {
		if op.Kind != "join" {
			continue
		}
		// Footers only: the pipeline's compile checks the columns.
		tp, err := ops.PlanTable(ctx, fsys, op.Join.Table, nil)
		if err != nil {
			return Footprint{}, fmt.Errorf("job %q: %s.table: %w", job.Name, op.Path, err)
		}
		side += min(decodedBytes(tp), sideBound(op.Join.MaxMemory))
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
	var unitBytes int64
	for _, u := range plan.Units {
		unitBytes = max(unitBytes, decodedUnitBytes(plan, u))
	}
	perRow := slotSize(plan, packFields(planFields(plan), nil), 1024) / 1024
	files := make([]string, len(plan.Files))
	for i, f := range plan.Files {
		files[i] = f.Path
	}
	// The header, schema block and alignment before slot 0: at most 2 MiB
	// plus the schema (96 bytes per field).
	header := int64(2<<20) + int64(96*len(plan.Fields))
	var arena *arenaLayout
	if l, ok := layoutArena(job, plan, workers); ok && job.Ring.Arena {
		arena = &l
	}
	return Footprint{
		ArenaBytes: arena.footprint(job.WorldSize), arena: arena,
		Rings: job.WorldSize, Slots: job.Ring.Slots, SlotSize: size,
		RingBytes: mulBounded(int64(job.WorldSize), header+mulBounded(int64(job.Ring.Slots), size)),
		InFlight:  inflight, UnitBytes: unitBytes,
		ShuffleBytes: int64(job.Shuffle.Buffer) * (max(perRow, 1) + windowIndexBytes), CacheBytes: int64(job.Cache.MaxMemory), SideBytes: side,
		Rows: plan.Rows, Units: len(plan.Units), Files: files, PlanDigest: JobPlanDigest(plan, job),
	}, nil
}

// decodedUnitBytes estimates the memory a unit's decoded columns take:
// values, offsets and validity, from the chunk metadata (a unit sliced out
// of a row group gets its share of the chunk's values), plus the eighth
// the decoder's buffers may hold beyond what they need.
func decodedUnitBytes(p *decode.Plan, u decode.Unit) int64 {
	groupRows := max(u.Rows, u.GroupRows(p.Fields))
	share := float64(u.Rows) / float64(max(groupRows, 1))
	var n float64
	for i, f := range p.Fields {
		if i >= len(u.Chunks) {
			continue
		}
		c := u.Chunks[i]
		switch f.Kind {
		case column.Fixed:
			n += float64(u.Rows * int64(f.DType.Size()))
		case column.List:
			n += share*float64(c.Values)*float64(f.DType.Size()) + float64(8*(u.Rows+1))
		default: // Bytes
			n += share*float64(c.Uncompressed) + float64(8*(u.Rows+1))
		}
		if f.Nullable {
			n += float64(u.Rows)
		}
	}
	return int64(min(n*9/8, maxFootprint)) // a float past int64 converts to garbage
}

// decodedBytes estimates a plan's decoded size: its column chunks'
// uncompressed bytes.
func decodedBytes(p *decode.Plan) int64 {
	var n int64
	for _, u := range p.Units {
		for _, c := range u.Chunks {
			n = min(n+bounded(c.Uncompressed), maxFootprint) // the footer's word
		}
	}
	return n
}

// sideBound is a join's max_memory, 1 GiB when unset (spec.Join).
func sideBound(s spec.Size) int64 {
	if s <= 0 {
		return 1 << 30
	}
	return int64(s)
}
