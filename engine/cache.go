package engine

import (
	"sync"

	"github.com/lastmile/lastmile/column"
)

// unitCache keeps the output of work units (decoded and through the
// row-local ops) for later epochs, up to max bytes. A unit's output is the
// same in every epoch: nothing row-local depends on the epoch (sampling
// hashes the row's key with the job's seed), and unit order and row
// shuffling happen after the reorder. So a cached unit is exact, and a
// later epoch costs a copy instead of a decode. Units are admitted first
// come, first kept; once full, the rest are recomputed each epoch. Safe
// for concurrent use by the workers.
type unitCache struct {
	mu    sync.Mutex
	max   int64
	used  int64
	units map[int]*column.Batch
}

func newUnitCache(max int64) *unitCache {
	if max <= 0 {
		return nil
	}
	return &unitCache{max: max, units: map[int]*column.Batch{}}
}

// get copies unit i's cached output into out and reports whether it was
// cached.
func (c *unitCache) get(i int, out *column.Batch) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	b := c.units[i]
	c.mu.Unlock()
	if b == nil {
		return false
	}
	// Cached batches are never changed once stored, so the copy needs no
	// lock.
	out.Reset()
	if b.Rows > 0 {
		out.AppendRows(b, 0, b.Rows)
	} else {
		out.Rows = 0
	}
	return true
}

// rows returns unit i's cached row count, or -1.
func (c *unitCache) rows(i int) int64 {
	if c == nil {
		return -1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.units[i]; b != nil {
		return int64(b.Rows)
	}
	return -1
}

// put stores a copy of unit i's output if it fits.
func (c *unitCache) put(i int, b *column.Batch) {
	if c == nil {
		return
	}
	n := int64(b.Bytes()) + 64*int64(len(b.Columns))
	c.mu.Lock()
	if c.units[i] != nil || c.used+n > c.max {
		c.mu.Unlock()
		return
	}
	c.used += n // reserve before copying outside the lock
	c.mu.Unlock()
	cp := new(column.Batch)
	if b.Rows > 0 {
		cp.AppendRows(b, 0, b.Rows)
	}
	c.mu.Lock()
	c.units[i] = cp
	c.mu.Unlock()
}
