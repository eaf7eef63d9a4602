package engine

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// The unit arena: decoding where the trainer reads (ring.arena)
//
// Without it a unit's columns are decoded into heap buffers and each
// batch's rows copied from there into its ring slot: every byte written
// twice, the second time 15-20% of an all-column job's producer CPU
// (docs/benchmarks.md, "Copies"). With it the decoder takes each column's
// buffer from a chunk of the job's arena, a shared file every trainer of
// the job maps (shm.Arena, ring format 4.2), and a batch whose rows are a
// run of one unit's rows, in order, names them in the chunk instead of
// copying them (pack.go, fillFromArena).
//
// Invariants:
//   - A chunk is taken only while it is free: held by no unit buffer,
//     and released by every ring whose batches named it. A batch names a
//     chunk from its pack (its slot's sequence recorded in the chunk's
//     until, per ring) until its consumer releases it (the ring's head
//     passes that sequence): the chunk cannot be taken again before.
//   - A unit buffer never decodes into arena memory it does not hold:
//     prepare strips every arena-backed buffer from it before a unit is
//     computed into it, so the decoder (which reuses a buffer it finds
//     large enough) and a peer's reply allocate anew.
//   - Taking a chunk never blocks: with none free the unit is decoded to
//     the heap and its batches copied, as without the arena (counted in
//     Fallbacks). So the arena cannot deadlock the pipeline of units in
//     flight, whatever its size.
//
// Steps, for a unit computed into buffer b:
//  1. unitRun.work calls prepare(b): b's arena-backed buffers are
//     dropped; a free chunk, if any, is held by b (and the chunk b still
//     held, if its unit was never emitted, goes back); the decoder's
//     allocator bumps through b's chunk.
//  2. The batcher packs b's rows; pack names b's chunk for each batch
//     that points into it (named: ring, sequence).
//  3. Once b's unit is emitted (batcher.add returned: every batch of its
//     rows is packed and named, its tail copied), retire gives the chunk
//     back, held by nothing.
//  4. A later prepare finds the chunk free once every ring's head passed
//     what named it.
//
// Rejected designs: a ring-buffer allocator in unit order (units are
// decoded out of order by several workers, and a pool of fixed chunks
// needs no order); blocking until a chunk frees (a batch straddling two
// units holds the first while the second waits for a chunk: a deadlock
// with a small arena); freeing when the unit is emitted (its batches are
// still unread).
type unitArena struct {
	a     *shm.Arena
	rings []*shm.Producer
	chunk int64 // bytes of each chunk

	mu     sync.Mutex
	chunks []arenaChunk
	held   map[*column.Batch]int // the chunk each unit buffer holds

	fallbacks atomic.Int64 // units decoded to the heap for want of a free chunk
	units     atomic.Int64 // units with a column decoded into the arena
	// serving is false when the rings were adopted (use): the arena
	// exists but no batch points into it.
	serving bool
}

type arenaChunk struct {
	mem    []byte
	used   int      // bytes handed out to the unit decoding into it
	holder bool     // a unit buffer holds it
	until  []uint64 // per ring: the head that frees it (0: never named)
}

// arenaAlign aligns each column in a chunk: a cache line, and every
// dtype's size.
const arenaAlign = 64

func alignArena(n int64) int64 { return (n + arenaAlign - 1) &^ (arenaAlign - 1) }

// newUnitArena creates the job's arena: chunks chunks of size bytes.
func newUnitArena(job *spec.Job, size int64, chunks int, claim func(uint64) error) (*unitArena, error) {
	mode, _ := job.Ring.FileMode()
	a, err := shm.CreateArena(shm.ArenaConfig{Dir: job.Ring.Dir, Size: size * int64(chunks), Mode: mode, Claim: claim})
	if err != nil {
		return nil, fmt.Errorf("ring.arena: %w", err)
	}
	ua := &unitArena{a: a, chunk: size, held: map[*column.Batch]int{}}
	data := a.Data()
	for k := 0; k < chunks; k++ {
		ua.chunks = append(ua.chunks, arenaChunk{mem: data[int64(k)*size : int64(k+1)*size : int64(k+1)*size]})
	}
	return ua, nil
}

// use starts the arena's service to rings, or reports that it cannot
// serve them: a ring that was adopted rather than created names its
// predecessor's arena, or none (shm.Producer.Arena), and gets copies.
func (ua *unitArena) use(rings []*shm.Producer) bool {
	for _, r := range rings {
		if r.Arena() != ua.a {
			return false
		}
	}
	ua.rings = rings
	for k := range ua.chunks {
		ua.chunks[k].until = make([]uint64, len(rings))
	}
	return true
}

// prepare readies unit buffer b for the next unit computed into it (step
// 1 above) and returns the decoder's allocator: nil when no chunk is
// free, or when ua is nil (no arena).
func (ua *unitArena) prepare(b *column.Batch) func(n int) []byte {
	if ua == nil {
		return nil
	}
	ua.mu.Lock()
	defer ua.mu.Unlock()
	if k, ok := ua.held[b]; ok {
		ua.chunks[k].holder = false
		delete(ua.held, b)
	}
	k := ua.free()
	for i := range b.Columns {
		c := &b.Columns[i]
		if _, in := ua.a.Offset(c.Data[:cap(c.Data)]); in || (k >= 0 && c.Kind != column.Bytes) {
			// Leave no arena memory in b, and, with a chunk to decode
			// into, no heap buffer the decoder would reuse instead
			// (strings keep theirs: the decoder grows them page by page,
			// never from the arena).
			c.Data = nil
		}
	}
	if k < 0 {
		ua.fallbacks.Add(1)
		return nil
	}
	ch := &ua.chunks[k]
	ch.holder, ch.used = true, 0
	clear(ch.until)
	ua.held[b] = k
	return func(n int) []byte {
		ua.mu.Lock()
		defer ua.mu.Unlock()
		if ua.held[b] != k || !ch.holder {
			return nil
		}
		end := alignArena(int64(ch.used)) + int64(n)
		if end > int64(len(ch.mem)) {
			return nil
		}
		if ch.used == 0 {
			ua.units.Add(1) // counted once the unit has a column in it
		}
		p := ch.mem[alignArena(int64(ch.used)):end:end]
		ch.used = int(end)
		return p
	}
}

// retire gives back the chunk unit buffer b holds once its unit was
// emitted (step 2 is over: every batch naming it is packed): it is free
// again once the rings release those batches. b keeps pointing into it
// until prepare strips it.
func (ua *unitArena) retire(b *column.Batch) {
	if ua == nil {
		return
	}
	ua.mu.Lock()
	defer ua.mu.Unlock()
	if k, ok := ua.held[b]; ok {
		ua.chunks[k].holder = false
		delete(ua.held, b)
	}
}

// free returns a free chunk, or -1: held by no buffer, and every ring's
// head past what named it. Called with mu held.
func (ua *unitArena) free() int {
	var heads []uint64
	for k := range ua.chunks {
		ch := &ua.chunks[k]
		if ch.holder {
			continue
		}
		if heads == nil {
			heads = make([]uint64, len(ua.rings))
			for r, p := range ua.rings {
				heads[r] = p.Stats().Head
			}
		}
		ok := true
		for r, u := range ch.until {
			if heads[r] < u {
				ok = false
				break
			}
		}
		if ok {
			return k
		}
	}
	return -1
}

// data returns the bytes of b's rows [lo, hi) of column ci at width w if
// b decoded them into the arena, else nil.
func (ua *unitArena) data(b *column.Batch, ci, lo, hi, w int) []byte {
	if ua == nil || ci >= len(b.Columns) {
		return nil
	}
	d := b.Columns[ci].Data
	if hi*w > len(d) || lo > hi {
		return nil
	}
	p := d[lo*w : hi*w : hi*w]
	if len(p) == 0 {
		return nil
	}
	if _, in := ua.a.Offset(p); !in {
		return nil
	}
	return p
}

// named records that the batch of sequence seq in ring r points into b's
// chunk (step 2).
func (ua *unitArena) named(b *column.Batch, r int, seq uint64) {
	ua.mu.Lock()
	defer ua.mu.Unlock()
	if k, ok := ua.held[b]; ok && r < len(ua.chunks[k].until) {
		ua.chunks[k].until[r] = max(ua.chunks[k].until[r], seq+1)
	}
}

// arenaFor creates the job's unit arena when it asks for one
// (ring.arena) and the run can use it: units computed here (no peers)
// and slots published as packed (no device staging, no benchmark's
// skipped copies). nil: none.
func arenaFor(job *spec.Job, opts Options, plan *decode.Plan, workers, rings int) (*unitArena, error) {
	if !job.Ring.Arena || opts.Spill != nil || opts.Stage != nil || opts.BenchSkipCopy {
		return nil, nil
	}
	l, ok := layoutArena(job, plan, workers)
	if !ok {
		// Nothing the decoder would put there: it sizes a buffer for a
		// unit that is its whole row group only (max_unit_rows splits).
		return nil, nil
	}
	if _, err := l.bytes(rings); err != nil {
		return nil, err
	}
	ua, err := newUnitArena(job, l.chunk, int(l.chunks(rings)), opts.ArenaClaim)
	if err != nil {
		return nil, err
	}
	ua.serving = true
	return ua, nil
}

// settleArenas sorts out the arenas once the rings exist: the arena of a
// dead producer's ring that Create replaced goes unless another ring of
// the job still names it (an adopted sibling: its unreleased batches lie
// there); the run's own arena serves the rings if each of them names it,
// and is removed at once if none does (every ring adopted). It returns
// the run's arena, nil once removed.
func settleArenas(dir string, rings []*shm.Producer, ua *unitArena, log *slog.Logger) *unitArena {
	named := map[uint64]bool{}
	for _, r := range rings {
		if id := r.NamedArena(); id != 0 {
			named[id] = true
		}
	}
	for _, r := range rings {
		if id, uid := r.ReplacedArena(); id != 0 && !named[id] {
			if _, err := shm.RemoveArena(dir, id, uid); err != nil {
				log.Warn("remove the arena of a replaced ring", "ring", r.Name(), "arena", shm.ArenaName(id), "err", err)
			}
		}
	}
	if ua == nil || ua.use(rings) {
		return ua
	}
	if !named[ua.a.ID()] {
		ua.close(true)
		return nil
	}
	log.Info("ring.arena: some rings were adopted from an earlier run; batches are copied into slots")
	ua.serving = false
	return ua
}

// shared returns the arena for the rings to name, or nil.
func (ua *unitArena) shared() *shm.Arena {
	if ua == nil {
		return nil
	}
	return ua.a
}

// close unmaps the arena, and removes its file with remove (once the
// rings that name it are removed).
func (ua *unitArena) close(remove bool) {
	if ua == nil {
		return
	}
	if remove {
		ua.a.Remove()
		return
	}
	ua.a.Close()
}
