package peer

import (
	"context"
	"sync"
)

// budget is a counting semaphore of bytes. A request larger than the whole
// budget is let through alone, so that one huge unit cannot wedge a peer.
type budget struct {
	mu    sync.Mutex
	cond  *sync.Cond
	limit int64
	used  int64
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
	for b.used > 0 && b.used+n > b.limit {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.cond.Wait()
	}
	b.used += n
	return nil
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
