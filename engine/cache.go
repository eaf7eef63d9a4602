package engine

import (
	"sync"
	"sync/atomic"

	"github.com/lastmile/lastmile/column"
)

// unitCache keeps the output of work units (decoded and through the
// row-local ops) for later epochs, up to max bytes. A unit's output is the
// same in every epoch: nothing row-local depends on the epoch (sampling
// hashes the row's key with the job's seed), and unit order and row
// shuffling happen after the reorder. So a cached unit is exact, and a
// later epoch takes it as it is, without a decode or a copy. Units are
// admitted first come, first kept; once full, the rest are recomputed each
// epoch. Safe for concurrent use by the workers.
//
// A stored batch is the worker's buffer that held the unit's output when
// it was computed (keep): nothing is copied to fill the cache. It is
// never changed again and lives as long as the job. So view hands it out
// by reference: the workers emit it as the unit's output, the batcher
// reads it, and the shuffle window may keep pointing at it past the emit
// (batcher.add). The one rule that keeps this safe is that nobody refills
// a stored batch: the pool hands every emitted batch back to a worker as
// the buffer for a later unit, and the worker drops it when owns says the
// cache holds it (unitRun.work); the spare pool forgets it when it is
// kept.
//
// A unit a peer computed and nobody verified (verify.go) is kept like
// any other, and noted (believed): once a verification finds a peer
// lying (distrust), those are served no more, and their row counts not
// trusted either, so a lie believed in one epoch is not delivered again
// in the next. Their batches stay held (owns), never refilled. The same
// happens once the run's Spill withdraws its trust in a peer that may
// have computed some (Revoker).
type unitCache struct {
	mu        sync.Mutex
	max       int64
	used      int64
	units     map[int]*column.Batch
	held      map[*column.Batch]bool // the values of units
	believed  map[int]bool           // units a peer computed, unverified
	distrusts bool                   // a peer was caught: believed units are not served
	// revoked is the run's Spill's Revoker.Revoked (nil: none), and
	// since its count as the run began.
	revoked func() uint64
	since   uint64
}

func newUnitCache(max int64) *unitCache {
	if max <= 0 {
		return nil
	}
	return &unitCache{max: max, units: map[int]*column.Batch{}, held: map[*column.Batch]bool{}, believed: map[int]bool{}}
}

// view returns unit i's cached output, which the caller must not change,
// or nil.
func (c *unitCache) view(i int) *column.Batch {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pollLocked()
	if c.distrusts && c.believed[i] {
		return nil
	}
	return c.units[i]
}

// distrust stops serving the units a peer computed that were kept
// unverified: a verification found a peer's values other than this
// host's, and any of them may be its (verify.go).
func (c *unitCache) distrust() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.distrusts = true
	c.mu.Unlock()
}

// owns reports whether b is a cached unit's output: read-only, and alive
// as long as the job.
func (c *unitCache) owns(b *column.Batch) bool {
	if c == nil || b == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held[b]
}

// rows returns unit i's cached row count, or -1.
func (c *unitCache) rows(i int) int64 {
	if c == nil {
		return -1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pollLocked()
	if b := c.units[i]; b != nil && !(c.distrusts && c.believed[i]) {
		return int64(b.Rows)
	}
	return -1
}

// keep makes b unit i's cached output if it fits, and reports whether it
// did. The cache then owns b: its caller hands b on as the unit's output
// to be read, and never refills it (unitRun.work). A first epoch thus
// caches its units without copying them; the price is that a unit is
// counted at its buffers' capacity, not at its length. believed says b
// is a peer's output nobody verified: once the cache distrusts, such a
// unit is not kept.
func (c *unitCache) keep(i int, b *column.Batch, believed bool) bool {
	if c == nil {
		return false
	}
	if copyCache.Load() {
		cp := new(column.Batch)
		if b.Rows > 0 {
			cp.AppendRows(b, 0, b.Rows)
		}
		b = cp
	}
	n := capBytes(b)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pollLocked()
	if c.units[i] != nil || c.used+n > c.max || believed && c.distrusts {
		return false
	}
	c.used += n
	c.units[i], c.held[b] = b, true
	if believed {
		c.believed[i] = true
	}
	return !copyCache.Load()
}

// copyCache makes keep store a copy and leave b to its caller, as the
// cache did before it kept buffers: the reference that BenchmarkCacheKeep
// holds keeping to.
var copyCache atomic.Bool

// capBytes is the memory b's buffers hold: their capacity, and a little
// for each column's header.
func capBytes(b *column.Batch) int64 {
	var n int64
	for i := range b.Columns {
		c := &b.Columns[i]
		n += int64(cap(c.Data)) + 8*int64(cap(c.Offsets)) + int64(cap(c.Valid)) + 64
	}
	return n
}
