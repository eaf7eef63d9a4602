package engine

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/lastmile/lastmile/ops"
	"github.com/lastmile/lastmile/shm"
)

// Cursor is where a rank's stream stands: the next batch to produce is
// batch Batch of epoch Epoch. A trainer that released batch (e, i) resumes
// at Cursor{e, i+1}; the engine moves to the next epoch by itself when
// epoch e has no batch i+1.
type Cursor struct {
	Epoch uint64 `json:"epoch"`
	Batch uint64 `json:"batch"`
}

// Less orders cursors.
func (c Cursor) Less(d Cursor) bool {
	return c.Epoch < d.Epoch || c.Epoch == d.Epoch && c.Batch < d.Batch
}

// Progress is a running job's live counters, safe to read from any
// goroutine while Run updates them (metrics, `lastmile top`).
type Progress struct {
	Rows, Batches, Bytes atomic.Int64 // packed into rings, padding included
	UnitsDone            atomic.Int64 // units decoded, all epochs
	UnitsSpilled         atomic.Int64 // of them, computed on CPU peers
	// UnitsHedged counts spilled units that were also started here
	// because their peer was slow (hedge.go); HedgesWon, those whose
	// local run finished first and was used.
	UnitsHedged, HedgesWon atomic.Int64
	// UnitsVerified counts spilled units computed here as well to check
	// the peer's output (verify.go); VerifyMismatches, those whose
	// outputs differed, the local one used.
	UnitsVerified, VerifyMismatches atomic.Int64
	LocalRows                       atomic.Int64 // input rows of the units computed here
	localClaimed                    atomic.Int64 // units claimed for local work: waiting for a CPU token or computing
	UnitsInFlight                   atomic.Int64 // units being decoded now
	DecodeNanos                     atomic.Int64 // time workers spent decoding, summed
	PackNanos                       atomic.Int64 // time spent packing batches, the sleeps on full rings (FullWait) left out
	Epoch                           atomic.Int64 // epoch being produced
	// FilesPruned and UnitsPruned are what the job's plan left out by
	// its filters (Stats), set once it is planned.
	FilesPruned, UnitsPruned atomic.Int64
	// RowsDeleted is the rows of the planned units that the input
	// tables' deletes remove (Stats), set once it is planned.
	RowsDeleted atomic.Int64
	// RowsRuledOut counts the rows the filters' page indexes ruled out
	// inside units that were read (pagefilter.go), as units are decoded.
	RowsRuledOut atomic.Int64

	perEpoch atomic.Int64  // batches per rank and epoch, plus 1; 0: not known yet
	stall    atomic.Uint64 // float64 bits: SetStall's last value

	mu    sync.Mutex
	rings []*shm.Producer
	arena *shm.Arena   // the unit arena the run created and its rings name (setArena)
	ua    *unitArena   // its chunks' counters (ArenaUnits)
	ops   *ops.Program // nil: no pipeline
	late  *lateFetch   // nil: no pipeline
}

// OpRows returns the rows in and out of each row-dropping op of the job's
// pipeline so far in this run (ops.Program.OpRows); nil without one.
func (p *Progress) OpRows() []ops.OpRows {
	p.mu.Lock()
	prog := p.ops
	p.mu.Unlock()
	if prog == nil {
		return nil
	}
	return prog.OpRows()
}

func (p *Progress) setProgram(prog *ops.Program, late *lateFetch) {
	p.mu.Lock()
	p.ops, p.late = prog, late
	p.mu.Unlock()
}

// LatePages returns the run's late-column page counts so far (zero
// without a pipeline).
func (p *Progress) LatePages() LatePages {
	p.mu.Lock()
	l := p.late
	p.mu.Unlock()
	return l.pages()
}

// RingStats returns each rank's ring counters (occupancy, time the
// producer waited on a full ring).
func (p *Progress) RingStats() []shm.ProducerStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]shm.ProducerStats, len(p.rings))
	for i, r := range p.rings {
		out[i] = r.Stats()
	}
	return out
}

// BatchesPerEpoch returns how many batches every rank gets per epoch (all
// ranks get as many), and whether that is known yet. It is known once the
// job is planned when no op drops rows (from the plan's row count), and
// otherwise once an epoch has ended: a drop depends on the row and the
// seed, never on the epoch, so every epoch has the same number of batches.
func (p *Progress) BatchesPerEpoch() (int64, bool) {
	n := p.perEpoch.Load()
	return n - 1, n > 0
}

func (p *Progress) setBatchesPerEpoch(n int64) { p.perEpoch.Store(n + 1) }

// SetStall records the share of the last few seconds that the job's most
// starved trainer waited on an empty ring, as whoever watches the rings'
// consumers measures it (the daemon samples their consumer_waiting
// word). A Spill reads it in Load.Stall.
func (p *Progress) SetStall(f float64) { p.stall.Store(math.Float64bits(f)) }

// Stall returns SetStall's last value, 0 if none.
func (p *Progress) Stall() float64 { return math.Float64frombits(p.stall.Load()) }

// setArena notes the unit arena the run created and its rings name.
func (p *Progress) setArena(ua *unitArena) {
	p.mu.Lock()
	p.arena, p.ua = ua.a, ua
	p.mu.Unlock()
}

// ArenaUnits returns how many units the run decoded into its unit arena
// (ring.arena) and how many to the heap for want of a free chunk (their
// batches copied): 0, 0 without an arena that serves the rings.
func (p *Progress) ArenaUnits() (inArena, toHeap int64) {
	p.mu.Lock()
	ua := p.ua
	p.mu.Unlock()
	if ua == nil || !ua.serving {
		return 0, 0
	}
	return ua.units.Load(), ua.fallbacks.Load()
}

// ChownArena gives the unit arena this run created (ring.arena) to uid
// and gid, through its open descriptor, and returns its id: what a
// daemon records to remove it with the job's rings. It returns 0 when
// the run created none that its rings name (no ring.arena, or every ring
// adopted from an earlier run, whose arena the caller recorded then).
func (p *Progress) ChownArena(uid, gid int) (uint64, error) {
	p.mu.Lock()
	a := p.arena
	p.mu.Unlock()
	if a == nil {
		return 0, nil
	}
	return a.ID(), a.Chown(uid, gid)
}

// ChownRings gives each ring of the run to uid and gid through its
// producer's descriptor, never by name (a user may replace a name in the
// ring directory with a link to another file), and returns each rank's
// error (nil: given).
func (p *Progress) ChownRings(uid, gid int) []error {
	p.mu.Lock()
	rings := p.rings
	p.mu.Unlock()
	errs := make([]error, len(rings))
	for i, r := range rings {
		errs[i] = r.Chown(uid, gid)
	}
	return errs
}

func (p *Progress) setRings(r []*shm.Producer) {
	p.mu.Lock()
	p.rings = r
	p.mu.Unlock()
}
