package engine

import (
	"context"
	"fmt"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/shm"
)

// OutField describes one column of the batches a job hands to trainers.
type OutField struct {
	Name     string
	Kind     column.Kind
	DType    column.DType
	Width    int // Fixed: elements per row; a [B, Width] tensor when > 1
	Nullable bool
	Group    int // 0, or g: a member of the job's feature group g-1 (packField)
}

// ringField maps an output column to the ring's schema.
func (f OutField) ringField() shm.Field {
	rf := shm.Field{Name: f.Name, DType: shm.DType(f.DType), Nullable: f.Nullable}
	switch f.Kind {
	case column.Fixed:
		rf.Kind = shm.Dense
		if f.Width > 1 {
			rf.Dims = []int64{int64(f.Width)}
		}
	case column.List:
		rf.Kind = shm.Ragged
	case column.Bytes:
		rf.Kind, rf.DType, rf.UTF8 = shm.Ragged, shm.DType(column.Uint8), true
	}
	return rf
}

// slotWriter is what the batcher needs of a ring (shm.Producer).
type slotWriter interface {
	Need(payloadBytes []int64) (int64, error)
	Acquire(ctx context.Context) (*shm.Slot, error)
	Publish(s *shm.Slot) error
	Discard(s *shm.Slot)
	Name() string
}

// span is rows [lo, hi) of a batch, or of several (a shuffle window).
type span struct {
	b      *column.Batch
	lo, hi int
	// idx, when not nil, permutes b: the span's rows are b's rows
	// idx[lo:hi] (the shuffle window, packed without a permuted copy).
	idx []int32
	// from, when not nil, makes the span's rows come from several
	// batches (b is nil): row j is srcs[from[j]]'s row idx[j] (a shuffle
	// window whose rows were not copied into one batch: window.go).
	srcs []*column.Batch
	from []int32
	// by groups such a span's rows by their batch, for the packers that
	// gather a column a source at a time (set by pack).
	by *bySource
}

// row is the row of sp.b at position j of the span's row order (a span
// of one batch).
func (sp *span) row(j int) int {
	if sp.idx != nil {
		return int(sp.idx[j])
	}
	return j
}

// col is column ci of the batch that holds position j of the span's row
// order, and the row there.
func (sp *span) col(j, ci int) (*column.Column, int) {
	if sp.from != nil {
		return &sp.srcs[sp.from[j]].Columns[ci], int(sp.idx[j])
	}
	return &sp.b.Columns[ci], sp.row(j)
}

// values is the number of list values of column i in the span's rows.
func (sp *span) values(i int) int64 {
	var v int64
	if sp.by != nil {
		for s, src := range sp.srcs {
			c := &src.Columns[i]
			for _, r := range sp.by.rows[s] {
				v += c.Offsets[r+1] - c.Offsets[r]
			}
		}
		return v
	}
	if sp.from != nil {
		for j := sp.lo; j < sp.hi; j++ {
			c, r := sp.col(j, i)
			v += c.Offsets[r+1] - c.Offsets[r]
		}
		return v
	}
	c := &sp.b.Columns[i]
	if sp.idx == nil {
		return c.Offsets[sp.hi] - c.Offsets[sp.lo]
	}
	for _, r := range sp.idx[sp.lo:sp.hi] {
		v += c.Offsets[r+1] - c.Offsets[r]
	}
	return v
}

// appendTo appends the span's rows to dst.
func (sp *span) appendTo(dst *column.Batch) {
	if sp.from != nil {
		if dst.Rows == 0 {
			dst.GatherFrom(sp.srcs, sp.from[sp.lo:sp.hi], sp.idx[sp.lo:sp.hi])
			return
		}
		for j := sp.lo; j < sp.hi; j++ {
			r := int(sp.idx[j])
			dst.AppendRows(sp.srcs[sp.from[j]], r, r+1)
		}
		return
	}
	if sp.idx == nil {
		dst.AppendRows(sp.b, sp.lo, sp.hi)
		return
	}
	if dst.Rows == 0 {
		dst.Gather(sp.b, sp.idx[sp.lo:sp.hi])
		return
	}
	for _, r := range sp.idx[sp.lo:sp.hi] {
		dst.AppendRows(sp.b, int(r), int(r)+1)
	}
}

// batcher cuts the ordered row stream of an epoch into batches of size
// rows, deals batch g of the epoch to rank g % world, and packs each into
// its rank's ring.
//
// Equal batch counts. DDP hangs if one rank runs out of batches before the
// others, so batches go out in steps: step k is batch k of every rank. A
// step is published only once it is complete, and only once the next step
// is complete too or the epoch has ended, so that the batches of the last
// step can carry the last-in-epoch flag. At the end of an epoch an
// incomplete step is dropped (last: drop) or completed with rows from the
// start of the epoch (last: pad), as torch's DistributedSampler does;
// last: keep (one rank only) publishes a short final batch. Each ring
// therefore holds at most two unpublished slots, which is why rings have at
// least three.
//
// Rows that do not fill a batch are copied into carry (fewer than size
// rows per unit); every other row is copied once, from the decoded unit
// straight into the ring slot, except the rows a shuffle window holds
// past their unit's add (window.go).
type batcher struct {
	size, world int
	last        string
	fields      []packField
	rings       []slotWriter
	// rankBase is the world rank of rings[0]: 0, or where this host's
	// ranks start among several hosts' (hosts.go).
	rankBase int
	// capSteps, when not negative, is the most steps an epoch has: the
	// fewest any host of several fills (last: drop, hosts.go); the rows
	// past them are dropped. padTo is the fewest: the most any host fills
	// (last: pad), the steps this host lacks padded whole.
	capSteps, padTo int64

	epoch uint64
	step  uint64 // index of the step being filled within the epoch
	rank  int    // next rank to fill in the step being filled
	// filling holds the slots of the step being filled; done those of the
	// complete step not yet published.
	filling, done []*shm.Slot
	padded        []bool
	doneCur       []shm.Cursor // cursors of the done slots
	haveDone      bool         // done holds a complete step (some slots may be nil: skipped on resume)
	fillRows      []int64      // rows and bytes of the filling slots, for
	fillBytes     []int64      // stats when they are discarded

	// Row shuffle (shuffle.buffer): rows collect in window until it holds
	// winSize rows, then go on permuted (see shuffle.go, window.go).
	winSize int
	seed    uint64
	window  window
	perm    []int32
	winIdx  uint64

	// Resume: skipIn rows are dropped before the window, skipOut after it
	// (rows of a skipped step still feed the pad source), and rank r's
	// batches before resume[r] are not packed.
	skipIn, skipOut int64
	resume          []Cursor

	carry     column.Batch // rows not yet in a batch
	padSrc    column.Batch // first rows of the epoch, for last: pad
	padNext   int          // next padSrc row to use
	sizes     []int64
	lastBytes int64      // payload bytes of the last packed batch
	bySrc     []bySource // per span of a batch being packed (bySource)
	tmp       packScratch
	skipCopy  bool // Options.BenchSkipCopy
	// arena, if not nil, is the job's unit arena: batches of one unit's
	// rows in order point into it (arena.go, fillFromArena).
	arena *unitArena

	prog *Progress
}

func newBatcher(size, world int, last string, fields []packField, rings []slotWriter, prog *Progress) *batcher {
	return &batcher{
		size: size, world: world, last: last, fields: fields, rings: rings, prog: prog,
		filling: make([]*shm.Slot, world), done: make([]*shm.Slot, world), padded: make([]bool, world),
		doneCur: make([]shm.Cursor, world), fillRows: make([]int64, world), fillBytes: make([]int64, world),
		capSteps: -1,
	}
}

// startEpoch resets the per-epoch state; the caller has ended the previous
// epoch. The epoch starts at step (0 for its beginning): the rows of the
// steps before it are dropped as they arrive, except those that share a
// shuffle window with the first kept row, which are needed to permute it.
func (b *batcher) startEpoch(epoch, step uint64) {
	if b.last == "pad" && b.padTo > 0 {
		step = 0 // padded steps continue the pad rows of the ones before: emit skips the resumed ranks' batches
	}
	b.epoch, b.step, b.rank = epoch, step, 0
	b.carry.Reset()
	b.padSrc.Reset()
	b.window.reset()
	b.padNext, b.winIdx = 0, 0
	skip := int64(step) * int64(b.world) * int64(b.size)
	b.skipIn, b.skipOut = skip, 0
	if b.winSize > 0 {
		w := skip / int64(b.winSize)
		if b.last == "pad" {
			// Padding takes the epoch's first rows after the shuffle, so
			// every window must be permuted to find them.
			w = 0
		}
		b.winIdx = uint64(w)
		b.skipIn, b.skipOut = w*int64(b.winSize), skip-w*int64(b.winSize)
	}
}

// add consumes every row of src, in order.
func (b *batcher) add(ctx context.Context, src *column.Batch) error {
	lo := 0
	if b.skipIn > 0 {
		n := int(min(b.skipIn, int64(src.Rows)))
		if b.winSize == 0 {
			b.collectPad(span{b: src, lo: 0, hi: n})
		}
		b.skipIn -= int64(n)
		lo = n
	}
	if lo == src.Rows {
		return nil
	}
	if b.winSize == 0 {
		return b.addRows(ctx, src, lo)
	}
	for lo < src.Rows {
		n := min(b.winSize-b.window.rows, src.Rows-lo)
		b.window.add(src, lo, lo+n)
		lo += n
		if b.window.rows == b.winSize {
			if err := b.flushWindow(ctx); err != nil {
				return err
			}
		}
	}
	// The pool reuses src once this returns.
	b.window.keep(src)
	return nil
}

// flushWindow permutes the window's rows and batches them.
func (b *batcher) flushWindow(ctx context.Context) error {
	n := b.window.rows
	if n == 0 {
		return nil
	}
	if cap(b.perm) < n {
		b.perm = make([]int32, n)
	}
	b.perm = b.perm[:n]
	permute(b.perm, newRNG(b.seed, streamRows, b.epoch, b.winIdx))
	b.winIdx++
	// The window's rows are packed in permuted order straight from
	// where they are.
	all := b.window.span(b.perm)
	lo := 0
	if b.skipOut > 0 {
		lo = int(min(b.skipOut, int64(n)))
		pad := all
		pad.hi = lo
		b.collectPad(pad)
		b.skipOut -= int64(lo)
	}
	all.lo = lo
	err := b.addSpan(ctx, all)
	b.window.reset()
	return err
}

// collectPad keeps the first rows of the epoch for last: pad.
func (b *batcher) collectPad(sp span) {
	if b.last == "pad" && b.padSrc.Rows < b.size*b.world && sp.hi > sp.lo {
		sp.hi = sp.lo + min(b.size*b.world-b.padSrc.Rows, sp.hi-sp.lo)
		sp.appendTo(&b.padSrc)
	}
}

// addRows batches rows [lo, src.Rows) of src.
func (b *batcher) addRows(ctx context.Context, src *column.Batch, lo int) error {
	return b.addSpan(ctx, span{b: src, lo: lo, hi: src.Rows})
}

// addSpan batches the rows of sp.
func (b *batcher) addSpan(ctx context.Context, sp span) error {
	b.collectPad(sp)
	for lo := sp.lo; lo < sp.hi; {
		if b.capSteps >= 0 && int64(b.step) >= b.capSteps {
			return nil // past the steps every host fills: dropped
		}
		need := b.size - b.carry.Rows
		if sp.hi-lo < need {
			rest := sp
			rest.lo = lo
			rest.appendTo(&b.carry)
			return nil
		}
		part := sp
		part.lo, part.hi = lo, lo+need
		spans := []span{part}
		if b.carry.Rows > 0 {
			spans = []span{{b: &b.carry, lo: 0, hi: b.carry.Rows}, part}
		}
		if err := b.emit(ctx, spans, b.size, 0); err != nil {
			return err
		}
		b.carry.Reset()
		lo += need
	}
	return nil
}

// emit packs one batch for the next rank of the step being filled; its
// last pad rows are padding (last: pad), which the slot header says
// (pad_rows, docs/ring-format.md §5.1) so that trainers can leave them out.
func (b *batcher) emit(ctx context.Context, spans []span, rows, pad int) error {
	var s *shm.Slot
	if c := b.resumeOf(b.rank); b.epoch > c.Epoch || b.epoch == c.Epoch && b.step >= c.Batch {
		var err error
		if s, err = b.pack(ctx, b.rings[b.rank], spans, rows); err != nil {
			return err
		}
		if err := s.SetPadRows(pad); err != nil {
			b.rings[b.rank].Discard(s)
			return err
		}
	} // else: this rank's trainer has had this batch already
	b.filling[b.rank], b.padded[b.rank] = s, pad > 0
	b.fillRows[b.rank], b.fillBytes[b.rank] = int64(rows), b.lastBytes
	b.rank++
	if b.rank == b.world {
		// The step is complete, so the one before it is not the epoch's
		// last: publish it.
		if b.haveDone {
			if err := b.publish(b.done, 0); err != nil {
				return err
			}
		}
		for r := range b.filling {
			flags := uint32(0)
			if b.padded[r] {
				flags |= shm.FlagPadded
			}
			b.doneCur[r] = shm.Cursor{Epoch: b.epoch, BatchIndex: b.step, Rank: uint32(b.rankBase + r), Flags: flags}
		}
		b.done, b.filling = b.filling, b.done
		clear(b.filling)
		b.haveDone = true
		b.rank = 0
		b.step++
	}
	return nil
}

func (b *batcher) resumeOf(rank int) Cursor {
	if rank < len(b.resume) {
		return b.resume[rank]
	}
	return Cursor{}
}

// endEpoch deals with the rows left at the end of the epoch and publishes
// the last complete step with the last-in-epoch flag.
func (b *batcher) endEpoch(ctx context.Context) error {
	if b.winSize > 0 {
		if err := b.flushWindow(ctx); err != nil {
			return err
		}
	}
	switch b.last {
	case "keep":
		if b.carry.Rows > 0 {
			if err := b.emit(ctx, []span{{b: &b.carry, lo: 0, hi: b.carry.Rows}}, b.carry.Rows, 0); err != nil {
				return err
			}
		}
	case "pad":
		if b.carry.Rows > 0 || b.rank > 0 || int64(b.step) < b.padTo {
			if b.padSrc.Rows == 0 {
				if int64(b.step) < b.padTo {
					return fmt.Errorf("this host's units yield no rows to pad its epoch with, and another host's fill %d steps: "+
						"its ranks would run out of batches before the others' (use last: drop, or fewer hosts)", b.padTo)
				}
				break
			}
			for b.rank != 0 || b.carry.Rows > 0 || int64(b.step) < b.padTo {
				// The carry's rows are real, the rows appended after
				// them padding: a batch may be all padding.
				pad := b.size - b.carry.Rows
				for b.carry.Rows < b.size {
					if b.padNext == b.padSrc.Rows {
						b.padNext = 0
					}
					n := min(b.size-b.carry.Rows, b.padSrc.Rows-b.padNext)
					b.carry.AppendRows(&b.padSrc, b.padNext, b.padNext+n)
					b.padNext += n
				}
				if err := b.emit(ctx, []span{{b: &b.carry, lo: 0, hi: b.carry.Rows}}, b.size, pad); err != nil {
					return err
				}
				b.carry.Reset()
			}
		}
	}
	// Whatever is still filling is an incomplete step: drop it.
	for r := b.rank - 1; r >= 0; r-- {
		if b.filling[r] == nil {
			continue
		}
		b.rings[r].Discard(b.filling[r])
		b.filling[r] = nil
		b.prog.Rows.Add(-b.fillRows[r])
		b.prog.Bytes.Add(-b.fillBytes[r])
		b.prog.Batches.Add(-1)
	}
	b.rank = 0
	b.carry.Reset()
	b.prog.setBatchesPerEpoch(int64(b.step))
	if b.haveDone {
		return b.publish(b.done, shm.FlagLastInEpoch)
	}
	return nil
}

func (b *batcher) publish(slots []*shm.Slot, flags uint32) error {
	b.haveDone = false
	for r, s := range slots {
		if s == nil {
			continue
		}
		c := b.doneCur[r]
		c.Flags |= flags
		s.SetCursor(c)
		if err := b.rings[r].Publish(s); err != nil {
			return err
		}
		slots[r] = nil
	}
	return nil
}

// abort gives back every slot held unpublished.
func (b *batcher) abort() {
	for r := range b.rings {
		if s := b.filling[r]; s != nil {
			b.rings[r].Discard(s)
		}
		if s := b.done[r]; s != nil {
			b.rings[r].Discard(s)
		}
		b.filling[r], b.done[r] = nil, nil
	}
}
