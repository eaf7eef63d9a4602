package engine_test

import (
	"bytes"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
)

// lateCaught is a lyingPeer whose first unit with rows is not verified
// (believed, lie and all) and every later one is: it is caught at its
// second unit with rows.
type lateCaught struct {
	*lyingPeer
	believed atomic.Bool
}

func (p *lateCaught) Ran(u decode.Unit, out *column.Batch) (bool, func(string)) {
	if out.Rows > 0 && p.believed.CompareAndSwap(false, true) {
		return false, nil
	}
	return p.lyingPeer.Ran(u, out)
}

// TestVerifyMismatchDistrustsCachedUnits: a lie believed before its
// peer was caught is not retracted from the epoch it was delivered in,
// but a later epoch must not deliver it again from the unit cache: once
// a mismatch is found, the cached units a peer computed that were not
// verified are computed again, and the later epochs are the local run's.
func TestVerifyMismatchDistrustsCachedUnits(t *testing.T) {
	src := strings.ReplaceAll(hedgeJob, "INPUT", "../testdata/small")
	src = strings.Replace(src, "epochs: 1", "epochs: 3", 1) + "cache: {max_memory: 256MiB}\n"
	want := runTensors(t, src, nil)
	prog := new(engine.Progress)
	p := &lateCaught{lyingPeer: &lyingPeer{up: unitProcessor(t, src), share: 1}}
	got := runTensorsWith(t, src, engine.Options{Spill: p, Progress: prog})
	if !p.caught.Load() || !p.believed.Load() {
		t.Fatalf("believed %v, caught %v: the test shows nothing", p.believed.Load(), p.caught.Load())
	}
	sameLaterEpochs(t, got, want, "the believed lie delivered again after its peer was caught")
}

// sameLaterEpochs fails t unless got, a three-epoch run's batches per
// rank, has want's batches in its second and third epochs; what names,
// in the failure, what a differing batch would show.
func sameLaterEpochs(t *testing.T, got, want [][][]byte, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d ranks, want %d", len(got), len(want))
	}
	for r := range want {
		if len(got[r]) != len(want[r]) || len(want[r])%3 != 0 {
			t.Fatalf("rank %d: %d batches, the local run %d", r, len(got[r]), len(want[r]))
		}
		perEpoch := len(want[r]) / 3
		for i := perEpoch; i < len(want[r]); i++ {
			if !bytes.Equal(got[r][i], want[r][i]) {
				t.Fatalf("rank %d epoch %d batch %d: %s", r, i/perEpoch, i%perEpoch, what)
			}
		}
	}
}
