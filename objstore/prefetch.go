package objstore

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lastmile/lastmile/decode"
)

// readAhead is a Client's prefetched blocks, shared by all its files, so
// that a block fetched for a unit before any decoder opened it (the engine
// announces the units workers take next, decode.PrefetchUnit) serves the
// decoder that opens it later. See the package doc for the invariants.
type readAhead struct {
	mu     sync.Mutex
	blocks map[string][]*block // by object URL, sorted by offset
	sem    chan struct{}       // fetches running at once
}

// block is one prefetched range of one version of an object. buf and err
// are written by its fetch goroutine and read only after done is closed;
// used counts the bytes readers took, and the block is released when it
// reaches want (the bytes asked for: a coalesced gap is never read) or
// when it goes stale.
type block struct {
	v    version // of the object (ETag, size, Last-Modified): a store without ETags has only the others
	off  int64
	buf  []byte
	err  error
	done chan struct{}
	used atomic.Int64
	want int64 // the bytes of buf that were asked for (not a coalesced gap)
	made time.Time
}

// staleAfter is how long a block nobody finished reading keeps its budget
// (a unit served from the unit cache, a failed unit, a cancelled job).
const staleAfter = 30 * time.Second

// prefetch starts fetching ranges of f's object that no block covers yet,
// merged and split (coalesce), within the budget. It never blocks on the
// network or on the budget.
func (c *Client) prefetch(f *File, ranges []decode.Range) {
	if c.cfg.PrefetchBytes < 0 {
		return
	}
	tail, err := f.openTail()
	if err != nil {
		return // closed: nobody reads the blocks
	}
	ra := &c.ahead
	now := time.Now()
	ra.mu.Lock()
	defer ra.mu.Unlock()
	c.sweepLocked(now)
	asked := coalesce(ranges, 0, math.MaxInt64, f.tailOff, tail != nil)
	for _, r := range coalesce(ranges, c.cfg.CoalesceGap, c.cfg.MaxBlock, f.tailOff, tail != nil) {
		if r.Off < 0 || r.Len <= 0 || r.Off+r.Len > f.v.size {
			continue
		}
		for _, r := range ra.uncoveredLocked(f.name, f.v, r) {
			want := overlap(asked, r)
			if want == 0 || !c.tryAcquire(r.Len) {
				continue
			}
			ra.startLocked(c, f, r, want, now)
		}
	}
}

// startLocked makes a block of f's version for r (its budget taken) and
// starts its fetch.
func (ra *readAhead) startLocked(c *Client, f *File, r decode.Range, want int64, now time.Time) {
	b := &block{v: f.v, off: r.Off, buf: make([]byte, r.Len), want: want, done: make(chan struct{}), made: now}
	if ra.blocks == nil {
		ra.blocks = map[string][]*block{}
	}
	bs := append(ra.blocks[f.name], b)
	slices.SortFunc(bs, func(x, y *block) int { return int(min(max(x.off-y.off, -1), 1)) })
	ra.blocks[f.name] = bs
	go func() {
		ra.sem <- struct{}{}
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(c.cfg.Retries+1)*c.cfg.RequestTimeout)
		b.err = f.get(ctx, b.buf, b.off)
		cancel()
		<-ra.sem
		close(b.done)
		if b.used.Load() >= b.want {
			// Read from a file's tail while it was fetched (credit).
			c.remove(f.name, b)
		}
	}()
}

// credit counts the bytes [from, to) of f's version, which a reader
// copied from its file's tail, as taken from the blocks holding them. A
// block may hold bytes of the tail: PrefetchUnit opens nothing, so it
// has no tail to leave out, and the file that reads the unit may have
// one (an open after the version cache's minute, or a fresh one). Such a
// block is never taken from, and held its budget until a sweep found it
// stale, 30 s later. A block whose asked bytes are all counted is
// removed now if its fetch is done, else by its fetch when it ends.
func (c *Client) credit(f *File, from, to int64) {
	ra := &c.ahead
	var read []*block
	ra.mu.Lock()
	for _, b := range ra.blocks[f.name] {
		if !b.v.same(f.v) {
			continue
		}
		k := min(to, b.off+int64(len(b.buf))) - max(from, b.off)
		if k > 0 && b.used.Add(k) >= b.want {
			read = append(read, b)
		}
	}
	ra.mu.Unlock()
	for _, b := range read {
		select {
		case <-b.done:
			c.remove(f.name, b)
		default:
		}
	}
}

// uncoveredLocked returns the parts of r that no block of name's version
// v holds: blocks of a version never share a byte, so every byte a
// reader takes counts toward the block that holds it.
func (ra *readAhead) uncoveredLocked(name string, v version, r decode.Range) []decode.Range {
	out := []decode.Range{r}
	for _, b := range ra.blocks[name] {
		if !b.v.same(v) {
			continue
		}
		bs, be := b.off, b.off+int64(len(b.buf))
		var next []decode.Range
		for _, x := range out {
			xs, xe := x.Off, x.Off+x.Len
			if be <= xs || xe <= bs {
				next = append(next, x)
				continue
			}
			if xs < bs {
				next = append(next, decode.Range{Off: xs, Len: bs - xs})
			}
			if be < xe {
				next = append(next, decode.Range{Off: be, Len: xe - be})
			}
		}
		out = next
	}
	return out
}

// nextBlock returns the offset of the first block of f's version that
// starts after off and before end, else end.
func (c *Client) nextBlock(f *File, off, end int64) int64 {
	c.ahead.mu.Lock()
	defer c.ahead.mu.Unlock()
	for _, b := range c.ahead.blocks[f.name] {
		if b.v.same(f.v) && b.off > off && b.off < end {
			end = b.off
		}
	}
	return end
}

// sweepLocked releases the fetched blocks older than staleAfter.
func (c *Client) sweepLocked(now time.Time) {
	for name, bs := range c.ahead.blocks {
		kept := bs[:0]
		for _, b := range bs {
			select {
			case <-b.done:
				if now.Sub(b.made) > staleAfter {
					c.release(int64(len(b.buf)))
					continue
				}
			default:
			}
			kept = append(kept, b)
		}
		if len(kept) == 0 {
			delete(c.ahead.blocks, name)
		} else {
			c.ahead.blocks[name] = kept
		}
	}
}

// take copies p (at off) from prefetched blocks of f's version, waiting
// for their fetches (or ctx); it returns how many leading bytes of p it
// filled (blocks may cover a prefix of p, or none of it).
func (c *Client) take(ctx context.Context, f *File, p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		b := c.find(f, off+int64(n))
		if b == nil {
			return n, nil
		}
		select {
		case <-b.done:
		case <-ctx.Done():
			return n, ctx.Err()
		}
		if b.err != nil {
			c.remove(f.name, b)
			return n, nil
		}
		k := copy(p[n:], b.buf[off+int64(n)-b.off:])
		if b.used.Add(int64(k)) >= b.want {
			c.remove(f.name, b)
		}
		n += k
	}
	return n, nil
}

// find returns the block of f's version holding the byte at off.
func (c *Client) find(f *File, off int64) *block {
	c.ahead.mu.Lock()
	defer c.ahead.mu.Unlock()
	for _, b := range c.ahead.blocks[f.name] {
		if b.v.same(f.v) && b.off <= off && off < b.off+int64(len(b.buf)) {
			return b
		}
	}
	return nil
}

// remove drops b (once) and releases its budget.
func (c *Client) remove(name string, b *block) {
	c.ahead.mu.Lock()
	defer c.ahead.mu.Unlock()
	bs := c.ahead.blocks[name]
	i := slices.Index(bs, b)
	if i < 0 {
		return
	}
	c.ahead.blocks[name] = slices.Delete(bs, i, i+1)
	if len(c.ahead.blocks[name]) == 0 {
		delete(c.ahead.blocks, name)
	}
	c.release(int64(len(b.buf)))
}

// overlap returns how many bytes of r the sorted, disjoint ranges hold.
func overlap(ranges []decode.Range, r decode.Range) int64 {
	var n int64
	for _, a := range ranges {
		n += max(0, min(a.Off+a.Len, r.Off+r.Len)-max(a.Off, r.Off))
	}
	return n
}

// coalesce sorts ranges, leaves out what the tail holds, merges ranges
// less than gap apart and splits the results into pieces of at most
// maxBlock bytes.
func coalesce(ranges []decode.Range, gap, maxBlock, tailOff int64, haveTail bool) []decode.Range {
	rs := make([]decode.Range, 0, len(ranges))
	for _, r := range ranges {
		if haveTail && r.Off+r.Len > tailOff {
			r.Len = tailOff - r.Off
		}
		if r.Len > 0 {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b decode.Range) int { return int(min(max(a.Off-b.Off, -1), 1)) })
	var merged []decode.Range
	for _, r := range rs {
		if k := len(merged) - 1; k >= 0 && r.Off <= merged[k].Off+merged[k].Len+gap {
			merged[k].Len = max(merged[k].Len, r.Off+r.Len-merged[k].Off)
			continue
		}
		merged = append(merged, r)
	}
	var out []decode.Range
	for _, r := range merged {
		for r.Len > maxBlock {
			out = append(out, decode.Range{Off: r.Off, Len: maxBlock})
			r.Off, r.Len = r.Off+maxBlock, r.Len-maxBlock
		}
		out = append(out, r)
	}
	return out
}
