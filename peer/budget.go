package peer

import (
	"context"
	"math"
	"sync"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
)

// The memory bound of a peer (ServerConfig.MaxMemory). A unit's memory
// is its decoded columns and the buffers its ops fill while it computes,
// then its output while that streams back. Its output's size is known
// only once it is computed, and taking the budget only then bounds
// nothing: the memory is in use by then. So a unit reserves an estimate
// before it computes (cachedJob.estimate: its columns' uncompressed
// bytes for its rows, plus the job's last output per input row times its
// rows), and once computed holds its output's real size instead
// (budget.resize, which does not wait: the output exists, and waiting
// would not free it). An estimate is capped at the whole budget, and a
// take larger than what is free waits only while others hold some: a
// unit larger than the budget runs alone, it never waits forever.
//
// The join side tables of the jobs a peer keeps compiled (jobCache, up
// to 8 jobs) are memory too, held for as long as a job stays in the cache
// rather than for a unit. They are counted as resident bytes
// (budget.hold, given back by budget.drop when the job leaves the cache;
// a bucket join's counted again after each unit, as its buckets come and
// go):
// a unit waits while other units hold memory and the units, the resident
// tables and its estimate together pass the limit. Resident bytes alone
// never make a unit wait, since no unit's end would free them: side
// tables that fill the budget leave a peer computing one unit at a time.
//
// The estimate's figures come from the requester's ticket, which the
// decoder checks against the file's footer only as it computes: a
// requester that lies makes its unit run alone, no worse.

// budget is a counting semaphore of bytes. A request larger than the whole
// budget is let through alone, so that one huge unit cannot wedge a peer.
type budget struct {
	mu       sync.Mutex
	cond     *sync.Cond
	limit    int64
	used     int64 // by units
	resident int64 // by the side tables of cached jobs
	waiting  int   // takes waiting now (tests)
}

func newBudget(limit int64) *budget {
	b := &budget{limit: limit}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *budget) take(ctx context.Context, n int64) error {
	stop := context.AfterFunc(ctx, func() { b.mu.Lock(); b.cond.Broadcast(); b.mu.Unlock() })
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.used > 0 && b.used+b.resident+n > b.limit {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.waiting++
		b.cond.Wait()
		b.waiting--
	}
	b.used += n
	return nil
}

// hold counts n resident bytes (a compiled job's side tables), without
// waiting: the memory exists.
func (b *budget) hold(n int64) {
	b.mu.Lock()
	b.resident += n
	b.mu.Unlock()
}

// drop gives back n resident bytes.
func (b *budget) drop(n int64) {
	b.mu.Lock()
	b.resident -= n
	b.cond.Broadcast()
	b.mu.Unlock()
}

// residentBytes returns the resident bytes counted now.
func (b *budget) residentBytes() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.resident
}

// resize changes a holding of from bytes to to bytes at once, without
// waiting: the used bytes may pass the limit until they are given back.
func (b *budget) resize(from, to int64) {
	b.mu.Lock()
	b.used += to - from
	if to < from {
		b.cond.Broadcast()
	}
	b.mu.Unlock()
}

// waiters returns the takes waiting now.
func (b *budget) waiters() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiting
}

func (b *budget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.cond.Broadcast()
	b.mu.Unlock()
}

// fairShare bounds each requester's units in flight at a peer to its share
// of the peer's slots among the requesters that have units there now.
type fairShare struct {
	mu        sync.Mutex
	perClient map[string]int
}

func (f *fairShare) take(who string, slots int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	active := len(f.perClient)
	if f.perClient[who] == 0 {
		active++
	}
	share := max(1, slots/max(active, 1))
	if f.perClient[who] >= share {
		return false
	}
	f.perClient[who]++
	return true
}

func (f *fairShare) give(who string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.perClient[who]--; f.perClient[who] <= 0 {
		delete(f.perClient, who)
	}
}

// estimate is the memory unit u is expected to need while it computes:
// its columns decoded (unitInputBytes) and its output, at the job's last
// output bytes per input row.
func (j *cachedJob) estimate(u *decode.Unit) int64 {
	perRow := max(math.Float64frombits(j.outPerRow.Load()), j.rowBytes)
	return clampBytes(float64(unitInputBytes(u)) + perRow*float64(max(u.Rows, 0)))
}

// learn records a computed unit's output bytes per input row.
func (j *cachedJob) learn(rows int64, outBytes int) {
	if rows > 0 {
		j.outPerRow.Store(math.Float64bits(float64(outBytes) / float64(rows)))
	}
}

// unitInputBytes estimates unit u's columns decoded: each column chunk's
// uncompressed size, prorated to the unit's share of its row group's
// rows. A flat chunk's level count is the row group's rows, a list
// chunk's at least as many, so the least level count is the row group's
// rows when any field is flat (the unit alone does not say which).
func unitInputBytes(u *decode.Unit) int64 {
	var total float64
	groupRows := int64(0)
	for _, c := range u.Chunks {
		total += float64(max(c.Uncompressed, 0))
		if c.Values > 0 && (groupRows == 0 || c.Values < groupRows) {
			groupRows = c.Values
		}
	}
	if groupRows > 0 && u.Rows > 0 && u.Rows < groupRows {
		total *= float64(u.Rows) / float64(groupRows)
	}
	return clampBytes(total)
}

// clampBytes converts a byte estimate to int64, at most 1<<62 (figures
// from a ticket may be anything).
func clampBytes(f float64) int64 {
	if !(f > 0) {
		return 0
	}
	return int64(min(f, 1<<62))
}

// outRowBytes is the bytes a row of output fields holds at least: a
// fixed column's elements, a list or bytes column's offset, a nullable
// column's validity byte. A unit's output has at most its rows, so this
// times its rows bounds its fixed columns from the first unit on: a job
// whose ops pad sequences to many elements a row is estimated at their
// size before a unit of it has been computed.
func outRowBytes(fields []engine.OutField) float64 {
	n := 0
	for _, f := range fields {
		if f.Kind == column.Fixed {
			n += max(f.Width, 1) * f.DType.Size()
		} else {
			n += 8
		}
		if f.Nullable {
			n++
		}
	}
	return float64(n)
}
