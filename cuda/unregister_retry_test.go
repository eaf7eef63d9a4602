//go:build linux && cgo

package cuda_test

import (
	"testing"

	"github.com/lastmile/lastmile/cuda"
	"github.com/lastmile/lastmile/cuda/cudatest"
)

// TestReviewCloseRetryUnregisters: a failed unregistration leaves the range
// mapped ("left mapped", so the driver never holds pinned pages of a range
// that is gone). Closing again must ask the driver again; Registration
// marked itself done before the call, so the retry skipped
// cuMemHostUnregister and unmapped a range the driver still had registered.
func TestCloseRetryUnregisters(t *testing.T) {
	f, _, c := open(t)
	f.Fail(t, "cuMemHostUnregister=1")
	m, err := cuda.Map(ringFile(t, 2<<20), 2<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Register(c, 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err == nil {
		t.Fatal("Close with a failing unregistration succeeded")
	}
	f.Fail(t, "")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	un := cudatest.Find(f.Calls(t, false), "cuMemHostUnregister")
	if len(un) != 2 || un[1].Result != 0 || un[1].Args["mapped"] != "1" {
		t.Fatalf("unregistrations %+v: want the failed one, then one that succeeded before the unmap", un)
	}
}
