package peer

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

// epochSpill is a Spiller that counts, epoch by epoch, the units each
// peer ran (by its address) and those computed here (the run's CPU
// gate): what is left of an epoch's units was served from the cache.
type epochSpill struct {
	*Spiller
	epoch atomic.Int64
	mu    sync.Mutex
	ran   map[int64]map[string]int
	here  map[int64]int
}

func (e *epochSpill) RunUnit(ctx context.Context, u decode.Unit, out *column.Batch, load engine.Load) (bool, error) {
	ran, err := e.Spiller.RunUnit(ctx, u, out, load)
	if ran {
		e.Spiller.mu.Lock()
		by := e.Spiller.ranBy[out]
		e.Spiller.mu.Unlock()
		e.mu.Lock()
		ep := e.epoch.Load()
		if e.ran[ep] == nil {
			e.ran[ep] = map[string]int{}
		}
		e.ran[ep][by.r.addr]++
		e.mu.Unlock()
	}
	return ran, err
}

// computed is how many units of epoch ep were computed, here or on a
// peer, rather than served from the cache.
func (e *epochSpill) computed(ep int64) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.here[ep]
	for _, k := range e.ran[ep] {
		n += k
	}
	return n
}

// TestCAReloadCachedUnitsNotServed: units a peer computed under a CA the
// requester then removes (SIGHUP), kept unverified in the job's unit
// cache, are not served again in the job's later epochs: they are
// computed again, and the batches are a local run's. The removal may
// mean the CA was compromised, and then those units are no better than
// a caught liar's (engine/cache.go, distrust). So whether the reload
// closes the connection they came by, or that one was gone already (a
// probe replaced it, or the peer left the pool) and the reload closes
// none. Before 2026-11-30 every later epoch served them all from the
// cache.
func TestCAReloadCachedUnitsNotServed(t *testing.T) {
	for _, tc := range []struct {
		name string
		gone bool // the connection the units came by was closed before the reload
	}{
		{"the reload closes the connection they came by", false},
		{"the connection they came by closed before the reload", true},
	} {
		t.Run(tc.name, func(t *testing.T) { cachedAcrossRemoval(t, tc.gone) })
	}
}

// cachedAcrossRemoval runs a cached job of three epochs spilling to the
// peers of two CAs, and removes the old CA as epoch 1 starts, having
// first replaced the connection to its peer by one never connected
// when gone.
func cachedAcrossRemoval(t *testing.T, gone bool) {
	c := newCARotation(t, nil)
	text := strings.Replace(c.f.text("revokecache"), "epochs: 1", "epochs: 3\ncache: {max_memory: 1GiB}", 1)
	job, err := spec.Parse("", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := c.f.run(job, nil)
	cfg := SpillerConfig{Verify: -1, Hedge: -1}
	cfg.Policy.Always = true
	sp, err := testSpiller(c.pool, c.f.roots, text, job, cfg)
	if err != nil {
		t.Fatal(err)
	}
	es := &epochSpill{Spiller: sp, ran: map[int64]map[string]int{}, here: map[int64]int{}}
	c.f.options = func(o *engine.Options) {
		o.EpochStart = func(e uint64) {
			es.epoch.Store(int64(e))
			if e == 1 {
				if gone {
					c.replaceConn(t, c.oldAddr)
				}
				c.removeOldCA(t)
			}
		}
		gate := o.Gate
		o.Gate = func(ctx context.Context) (func(), error) {
			es.mu.Lock()
			es.here[es.epoch.Load()]++
			es.mu.Unlock()
			return gate(ctx)
		}
	}
	same(t, "a cached run across the old CA's removal", c.f.run(job, es), want)
	old, units := es.ran[0][c.oldAddr], es.computed(0) // epoch 0 computes each unit
	if old == 0 {
		t.Fatalf("the peer of the old CA ran no unit in epoch 0: %+v", es.ran)
	}
	for ep := int64(1); ep < 3; ep++ {
		n := es.computed(ep)
		t.Logf("epoch %d: %d of %d units computed (here %d, on peers %v), the rest served from the cache", ep, n, units, es.here[ep], es.ran[ep])
		if n < old {
			t.Fatalf("epoch %d served %d of its %d units from the cache: the peer of the removed CA had computed %d of epoch 0's, unverified, and some were served again",
				ep, units-n, units, old)
		}
	}
}

// replaceConn replaces the connection to the peer at addr by one never
// connected, as a probe after a failure does (conns.fresh), closing the
// old one.
func (c *caRotation) replaceConn(t *testing.T, addr string) {
	t.Helper()
	cs := c.pool.peers[addr].conns
	cs.mu.Lock()
	defer cs.mu.Unlock()
	next, err := cs.dial(cs.roots())
	if err != nil {
		t.Fatal(err)
	}
	cs.retireLocked(cs.cur)
	cs.cur = next
}
