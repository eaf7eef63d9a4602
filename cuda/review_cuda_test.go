//go:build linux && cgo

package cuda_test

import (
	"testing"

	"github.com/lastmile/lastmile/cuda/cudatest"
)

// TestReviewFreeRetriesAfterFailure: Registration.Unregister asks the
// driver again after a failed call (the range is still registered), but
// DeviceBuffer.Free marks the buffer freed before it calls cuMemFree: a
// failed free is never retried, and the second Free reports success
// (nil) for device memory that was never freed.
func TestReviewFreeRetriesAfterFailure(t *testing.T) {
	f, _, c := open(t)
	b, err := c.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	f.Fail(t, "cuMemFree_v2=1@1")
	if err := b.Free(); err == nil {
		t.Fatal("Free: no error although cuMemFree failed")
	}
	err = b.Free()
	n := len(cudatest.Find(f.Calls(t, false), "cuMemFree_v2"))
	if n != 2 || err != nil {
		t.Fatalf("second Free after a failed one: %d cuMemFree calls in all, err %v: want the driver asked again", n, err)
	}
}
