package engine

import (
	"fmt"
	"math"
	"slices"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// maxArenaBytes bounds a unit arena: far beyond any host's shared memory,
// and far enough from int64's end that the footprint's sums cannot wrap.
// A plan that asks for more is one whose footers claim absurd value
// counts (a chunk's num_values is the file's word, which the decoder
// takes as an upper bound only).
const maxArenaBytes = 1 << 48

// arenaLayout is how a job's unit arena is cut, computed from its plan
// alone: the same for the run (arenaFor) and for the job's footprint
// (EstimateFootprint), so that what the daemon admits is what the run
// creates.
//
// Only whole units count: the decoder decodes into the arena only a unit
// that is its row group entire (decode.Decoder.SetAlloc); the units that
// max_unit_rows cuts out of larger row groups are decoded to the heap
// and neither size the chunks nor take them.
type arenaLayout struct {
	chunk    int64   // bytes of a chunk: the largest whole unit's columns, decoded
	inflight int     // units in flight (a chunk each until emitted)
	perRing  int64   // batches of a ring that may be unreleased: slots + MaxHeld
	batch    int64   // rows a batch
	rows     []int64 // each whole unit's rows out (less its deleted rows), ascending
}

// layoutArena returns the layout of job's arena over plan, and false
// when the plan has no whole unit (nothing would be decoded there).
func layoutArena(job *spec.Job, plan *decode.Plan, workers int) (arenaLayout, bool) {
	l := arenaLayout{
		inflight: job.Decode.InFlight,
		perRing:  int64(job.Ring.Slots + shm.MaxHeld),
		batch:    int64(max(job.Batch.Size, 1)),
	}
	if l.inflight == 0 {
		l.inflight = 2 * workers
	}
	for i := range plan.Units {
		u := &plan.Units[i]
		if !u.Whole(plan.Fields) {
			continue
		}
		l.chunk = max(l.chunk, wholeUnitBytes(plan, u))
		l.rows = append(l.rows, max(u.Rows-int64(len(u.Deleted)), 1))
	}
	slices.Sort(l.rows)
	return l, l.chunk > 0 && len(l.rows) > 0
}

// wholeUnitBytes is what unit u's columns take decoded whole, as the
// decoder reserves them (reserveWhole: the chunk's level count times the
// value size, and a thirty-second more), each aligned. String columns
// are left out: the decoder grows those from their pages. It saturates
// at maxArenaBytes.
func wholeUnitBytes(plan *decode.Plan, u *decode.Unit) int64 {
	var n int64
	for k := range u.Chunks {
		if k >= len(plan.Fields) || plan.Fields[k].Kind == column.Bytes {
			continue
		}
		v := min(max(u.Chunks[k].Values, 0), math.MaxInt32) * int64(plan.Fields[k].DType.Size())
		n = min(n+v+v/32+arenaAlign, maxArenaBytes)
	}
	return alignArena(n)
}

// chunks is how many chunks the arena of a run making rings rings
// holds: one for each unit in flight (the pool's bound: a unit starts
// only once the one InFlight before it was emitted, and a chunk goes back
// when its unit is emitted: retire), plus those the rings' unreleased
// batches can name.
//
// The batcher deals batches to the rings in turn and stops at a full
// one, so the unreleased batches of all rings lie within the last
// rings × (slots + held) batches, W rows: they touch the units wholly
// inside W, at most as many as the smallest units that fit in W
// together, plus one at each end. And a batch names at most one chunk
// (fillFromArena: a batch of one unit's rows only), so never more than
// those batches. Counting the smallest units, not a typical one, keeps a
// table of mixed unit sizes (large compacted row groups beside small
// appended ones, files' short last row groups) from copying its small
// units for want of a chunk. Too few chunks cost copies, never
// correctness.
func (l arenaLayout) chunks(rings int) int64 {
	batches := int64(max(rings, 1)) * l.perRing
	window := batches * l.batch // under 2^53 within the spec's limits (4096 ranks, 65536 slots, 2^24 rows)
	var inside, sum int64
	for _, r := range l.rows {
		if sum += r; sum > window {
			break
		}
		inside++
	}
	return int64(l.inflight) + min(batches, inside+2)
}

// bytes is the arena's size for rings rings, or an error when it would
// pass maxArenaBytes.
func (l arenaLayout) bytes(rings int) (int64, error) {
	n := l.chunks(rings)
	if l.chunk <= 0 || n <= 0 {
		return 0, nil
	}
	if n > maxArenaBytes/l.chunk {
		return 0, fmt.Errorf("the unit arena would take %d chunks of %d bytes, more than %d bytes: the input files' footers claim far more values than a row group holds", n, l.chunk, int64(maxArenaBytes))
	}
	return n * l.chunk, nil
}

// footprint is the size of the arena file a run making rings rings
// creates, its header page and its rounding to pages included: 0 for
// none (a nil layout), or for one too large to create.
func (l *arenaLayout) footprint(rings int) int64 {
	if l == nil {
		return 0
	}
	n, err := l.bytes(rings)
	if err != nil || n == 0 {
		return 0
	}
	const page = 4096
	return shm.ArenaHeaderSize + (n+page-1)&^(page-1)
}
