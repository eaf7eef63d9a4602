package engine_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
)

// revokedLiar is a lyingPeer nobody verifies, whose Spill withdraws its
// trust (engine.Revoker) as epoch 1 starts: it runs no unit after.
type revokedLiar struct {
	*lyingPeer
	revoked atomic.Uint64
}

func (p *revokedLiar) Revoked() uint64 { return p.revoked.Load() }

func (p *revokedLiar) RunUnit(ctx context.Context, u decode.Unit, out *column.Batch, load engine.Load) (bool, error) {
	if p.revoked.Load() > 0 {
		return false, nil
	}
	return p.lyingPeer.RunUnit(ctx, u, out, load)
}

// TestRevokedPeerCachedUnitsNotServed: units a peer computed, believed
// and kept in the unit cache, are not served again once the Spill
// withdraws its trust in the peer (engine.Revoker; its CA removed, say):
// the epochs after are the local run's, though the peer lied in the
// first. Before 2026-11-30 the cache served them in every later epoch.
func TestRevokedPeerCachedUnitsNotServed(t *testing.T) {
	src := strings.ReplaceAll(hedgeJob, "INPUT", "../testdata/small")
	src = strings.Replace(src, "epochs: 1", "epochs: 3", 1) + "cache: {max_memory: 256MiB}\n"
	want := runTensors(t, src, nil)
	p := &revokedLiar{lyingPeer: &lyingPeer{up: unitProcessor(t, src), share: 0}}
	revoke := func(e uint64) {
		if e == 1 {
			p.revoked.Add(1)
		}
	}
	got := runTensorsWith(t, src, engine.Options{Spill: p, EpochStart: revoke})
	if p.lied.Load() == 0 {
		t.Fatal("the peer told no lie: the test shows nothing")
	}
	sameLaterEpochs(t, got, want, "a unit of the peer no longer trusted served again from the cache")
}
