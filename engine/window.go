package engine

import (
	"sort"
	"sync/atomic"

	"github.com/lastmile/lastmile/column"
)

// The shuffle window (shuffle.buffer = W rows) without a second copy.
//
// What it must give: the ordered row stream of an epoch is cut into
// windows of W rows, and each window's rows go to batches in a
// permutation of them (shuffle.go). So every row of a window must be
// readable when the window is flushed, after the last of its rows has
// arrived, and a window's rows come from one unit output or several.
//
// Invariants.
//   - A piece names rows of a batch that is alive and unchanged until
//     the window is flushed: a unit output the cache holds (stable: it
//     lives as long as the job and nobody writes it again, cache.go), the
//     unit output being added (the pool hands it to another worker only
//     after add returns), or the window's own batch.
//   - So when add returns, no piece names the unit just added unless it is
//     stable: its rows still waiting are copied into the window's own
//     batch first (keep). Those are the only rows that are copied before
//     the ring slot, and at most W of them per unit.
//   - Packing reads the pieces through the permutation, each row once,
//     straight into the ring slot (span.from). The bytes are those of
//     copying every row into one window batch and gathering from it, which
//     the window did before: only where the bytes come from changed.
//
// Steps. add appends a piece per run of rows; when W rows are in, the
// batcher flushes: span builds the permuted (source, row) pairs and the
// batcher packs them; reset empties the window. keep runs at the end of
// every add.
//
// Rejected designs. Holding every unit output the window names past its
// emit, with a pool that waits for the window to let go: no copy at all
// in a first epoch, but a unit's whole output (100,000 rows of 46 columns
// in the memory benchmark) held to keep its last few thousand rows, which
// the job's memory bound would have to count on top of the units in
// flight. Copying every row into the window, as before: one heap copy of
// every row in every epoch, 7% of a six-epoch run's CPU with the example
// pipeline (a fifth of a cached epoch's), for memory this design needs
// anyway for the tails.
type window struct {
	rows   int
	pieces []piece
	own    column.Batch // rows of unit outputs that are not stable
	stable func(*column.Batch) bool

	// Scratch of span, reused window after window.
	srcs       []*column.Batch
	starts     []int
	pieceSrc   []int32
	from, idx  []int32
	shiftedIdx []int32
}

// copyWindow makes windows copy every row they take, as they did before
// they pointed at rows: the reference that tests hold the window to.
var copyWindow atomic.Bool

// windowIndexBytes is what a window's index takes per row: its
// permutation, and the source and row of each permuted row (or the
// shifted permutation of a window that is one piece).
const windowIndexBytes = 4 + 4 + 4 + 4

// piece is rows [lo, hi) of b, in the window's order.
type piece struct {
	b      *column.Batch
	lo, hi int
}

// add puts rows [lo, hi) of src at the end of the window.
func (w *window) add(src *column.Batch, lo, hi int) {
	w.pieces = append(w.pieces, piece{src, lo, hi})
	w.rows += hi - lo
	if copyWindow.Load() {
		w.copyOut(src)
	}
}

// keep copies the rows of src that the window still names into its own
// batch, unless src is stable. Called when src's add ends.
func (w *window) keep(src *column.Batch) {
	if w.stable != nil && w.stable(src) {
		return
	}
	w.copyOut(src)
}

// copyOut copies the rows of src that the window names into its own
// batch. Pieces of its own batch that meet are merged, so a window whose
// rows were all copied is one piece, packed through a plain index.
func (w *window) copyOut(src *column.Batch) {
	out := w.pieces[:0]
	for _, p := range w.pieces {
		if p.b == src {
			at := w.own.Rows
			w.own.AppendRows(src, p.lo, p.hi)
			p = piece{&w.own, at, at + p.hi - p.lo}
		}
		if k := len(out) - 1; k >= 0 && p.b == &w.own && out[k].b == &w.own && out[k].hi == p.lo {
			out[k].hi = p.hi
			continue
		}
		out = append(out, p)
	}
	clear(w.pieces[len(out):])
	w.pieces = out
}

// reset empties the window.
func (w *window) reset() {
	w.rows = 0
	clear(w.pieces)
	w.pieces = w.pieces[:0]
	w.own.Reset()
}

// span is the window's rows in the order perm gives them (len(perm) ==
// w.rows): one batch through an index when a single piece holds them all,
// else pairs of source and row. It is valid until the next reset.
func (w *window) span(perm []int32) span {
	n := len(perm)
	if len(w.pieces) == 1 {
		p := w.pieces[0]
		if p.lo == 0 {
			return span{b: p.b, lo: 0, hi: n, idx: perm}
		}
		w.shiftedIdx = growInt32(w.shiftedIdx, n)
		for j, r := range perm {
			w.shiftedIdx[j] = r + int32(p.lo)
		}
		return span{b: p.b, lo: 0, hi: n, idx: w.shiftedIdx}
	}
	w.sources()
	w.from, w.idx = growInt32(w.from, n), growInt32(w.idx, n)
	for j, r := range perm {
		// The piece holding window row r: the last one starting at or
		// before it.
		k := sort.SearchInts(w.starts, int(r)+1) - 1
		p := &w.pieces[k]
		w.from[j] = w.pieceSrc[k]
		w.idx[j] = int32(p.lo + int(r) - w.starts[k])
	}
	return span{lo: 0, hi: n, srcs: w.srcs, from: w.from, idx: w.idx}
}

// sources lists the window's distinct batches (the pieces of its own
// batch share one), where each piece starts in the window, and which
// source each piece reads.
func (w *window) sources() {
	w.srcs, w.starts, w.pieceSrc = w.srcs[:0], w.starts[:0], w.pieceSrc[:0]
	ownAt := int32(-1)
	at := 0
	for _, p := range w.pieces {
		w.starts = append(w.starts, at)
		at += p.hi - p.lo
		s := int32(len(w.srcs))
		if p.b == &w.own {
			if ownAt < 0 {
				ownAt = s
				w.srcs = append(w.srcs, p.b)
			}
			s = ownAt
		} else {
			// A unit output appears in a window as one piece: its rows
			// are consecutive in the stream.
			w.srcs = append(w.srcs, p.b)
		}
		w.pieceSrc = append(w.pieceSrc, s)
	}
}

// bySource is the rows of a span over several batches grouped by batch:
// the span's rows pos[s] (counted from its first) are rows rows[s] of
// srcs[s], both in the span's order. Gathering a column a source at a
// time is a loop as tight as a one-batch gather's, where looking up each
// row's batch made it twice as slow.
type bySource struct {
	pos, rows [][]int32
}

// build groups the rows of sp, which must have from set.
func (g *bySource) build(sp *span) *bySource {
	for len(g.pos) < len(sp.srcs) {
		g.pos, g.rows = append(g.pos, nil), append(g.rows, nil)
	}
	for s := range sp.srcs {
		g.pos[s], g.rows[s] = g.pos[s][:0], g.rows[s][:0]
	}
	for j := sp.lo; j < sp.hi; j++ {
		s := sp.from[j]
		g.pos[s] = append(g.pos[s], int32(j-sp.lo))
		g.rows[s] = append(g.rows[s], sp.idx[j])
	}
	return g
}

func growInt32(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}
