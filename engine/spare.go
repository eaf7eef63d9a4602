package engine

import (
	"slices"
	"sync"

	"github.com/lastmile/lastmile/column"
)

// batchPool keeps the result buffers of one pool.Run for the next: Run
// hands work a buffer only once the unit that used it was emitted, and
// starts each run with none, so the buffers it made are collected as they
// are emitted and handed out again to the next run's first units.
type batchPool struct {
	mu    sync.Mutex
	free  []*column.Batch
	known map[*column.Batch]bool
}

func (p *batchPool) get() *column.Batch {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free = p.free[:n-1]
		return b
	}
	return new(column.Batch)
}

// put gives back a buffer that was never emitted: a hedged unit's
// losing result (hedge.go).
func (p *batchPool) put(b *column.Batch) {
	p.mu.Lock()
	p.free = append(p.free, b)
	p.mu.Unlock()
}

// seen notes a buffer in circulation (called by emit, one goroutine).
func (p *batchPool) seen(b *column.Batch) {
	p.mu.Lock()
	if p.known == nil {
		p.known = map[*column.Batch]bool{}
	}
	p.known[b] = true
	p.mu.Unlock()
}

// forget takes b out of circulation for good: the unit cache keeps it.
func (p *batchPool) forget(b *column.Batch) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.known, b)
	p.free = slices.DeleteFunc(p.free, func(f *column.Batch) bool { return f == b })
}

// reclaim makes every buffer of the finished run free again.
func (p *batchPool) reclaim() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free = p.free[:0]
	for b := range p.known {
		p.free = append(p.free, b)
	}
}
