//go:build linux && cgo

package gpu

// Failure paths of the GPU staging plumbing, against the fake libcuda.
// The fake runs copies at once, so these tests check the order of the
// driver calls, which a real driver's queued DMA depends on.

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/cuda"
	"github.com/lastmile/lastmile/cuda/cudatest"
	"github.com/lastmile/lastmile/shm"
)

// lastCopyThenUnregister returns, in calls, the index of the last
// successful host-to-device copy before the first cuMemHostUnregister,
// the index of that unregistration, and whether a successful
// cuStreamSynchronize lies between them.
func lastCopyThenUnregister(calls []cudatest.Call) (copyAt, unregAt int, synced bool) {
	copyAt, unregAt = -1, -1
	for i, c := range calls {
		if c.Name == "cuMemHostUnregister" {
			unregAt = i
			break
		}
		if c.Name == "cuMemcpyHtoDAsync_v2" && c.Result == 0 {
			copyAt, synced = i, false
		}
		if c.Name == "cuStreamSynchronize" && c.Result == 0 && copyAt >= 0 {
			synced = true
		}
	}
	return copyAt, unregAt, synced
}

// TestCheckRemoteRingCopyFailsMidway: the self-test's NUMA-remote
// measurement (bench.remote) registers a second ring and queues copies
// from it. When one of those copies fails after others were queued,
// remote returns at once and its deferred ring.close unregisters and
// unmaps the remote ring; checkDevice's deferred stream wait only runs
// after remote has returned. So the ring is let go while copies from it
// may still be queued: the bug c73bca9 fixed for the local ring, left in
// the remote one. (Only hosts with two NUMA nodes reach remote; here
// local=1 makes node 0 the "other" node on a one-node host.)
func TestCheckRemoteRingCopyFailsMidway(t *testing.T) {
	f := cudatest.Build(t)
	d, err := cuda.Open(cuda.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Retain(0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	size := int64(1 << 20)
	b := &bench{c: c, dev: 0, iters: 4, sizes: []int64{size}, r: &Report{}}
	if b.dst, err = c.Alloc(size); err != nil {
		t.Fatal(err)
	}
	defer b.dst.Free()
	if b.s, err = c.NewStream(cuda.StreamNonBlocking); err != nil {
		t.Fatal(err)
	}
	defer b.s.Destroy()
	// copies 1 and 2 untimed, a wait, copy 3 queued, copy 4 fails
	f.Fail(t, "cuMemcpyHtoDAsync_v2=1@4")
	if err := b.remote(context.Background(), "gpu 0", t.TempDir(), 1, size); err == nil {
		t.Fatal("remote: no error although a copy failed")
	}
	calls := f.Calls(t, false)
	copyAt, unregAt, synced := lastCopyThenUnregister(calls)
	if copyAt < 0 || unregAt < 0 {
		t.Fatalf("calls %v: want copies from the remote ring, then its unregistration", cudatest.Names(calls))
	}
	if !synced {
		t.Fatalf("remote ring unregistered (call %d) with the copy at call %d never waited for: %v",
			unregAt, copyAt, cudatest.Names(calls[copyAt:unregAt+1]))
	}
}

// FakeDeviceRing makes a real 4-slot ring and retains the fake driver's
// device 0 (exported for the package's external tests too).
func FakeDeviceRing(t *testing.T) (*cudatest.Fake, *cuda.Context, string) {
	t.Helper()
	f := cudatest.Build(t)
	dir := t.TempDir()
	p, err := shm.Create(shm.Config{Dir: dir, Name: "dev", Slots: 4, SlotSize: 2 << 20,
		Fields: []shm.Field{{Name: "b", Kind: shm.Dense, DType: shm.Uint8}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); p.Remove() })
	d, err := cuda.Open(cuda.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Retain(0)
	if err != nil {
		t.Fatal(err)
	}
	return f, c, filepath.Join(dir, "dev")
}

// TestDeviceRingCloseAfterFailedWait: a Stage whose event record
// fails (non-sticky) returns with its copy queued and never waited for;
// the Stager keeps the DeviceRing until Close. Close then waits for the
// stream; when that wait failed too, it went on before the fix: freed the
// device slots, unregistered the ring and unmapped it, though nothing
// said the queued copy was done. Like Mapping.Close, whose failed
// unregistration leaves a range mapped ("leaked, not freed under the
// driver"), it now leaks the slots and the mapping instead.
func TestDeviceRingCloseAfterFailedWait(t *testing.T) {
	f, c, path := FakeDeviceRing(t)
	defer c.Release()
	r, err := OpenDeviceRing(c, path, "0000:3b:00.0", 1)
	if err != nil {
		t.Fatal(err)
	}
	f.Fail(t, "cuEventRecord=999")
	if err := r.Stage(0, 4096); err == nil {
		t.Fatal("Stage: no error although the event record failed")
	}
	f.Fail(t, "cuStreamSynchronize=999")
	if err := r.Close(); err == nil {
		t.Fatal("Close: no error although its wait failed")
	}
	calls := f.Calls(t, false)
	copyAt, unregAt, synced := lastCopyThenUnregister(calls)
	if copyAt >= 0 && unregAt >= 0 && !synced {
		t.Fatalf("ring unregistered (and unmapped) at call %d with the copy at call %d never waited for: %v",
			unregAt, copyAt, cudatest.Names(calls[copyAt:unregAt+1]))
	}
}

// TestStagerUnplacedSaysWhy: a device-staged rank that placement
// left without a GPU (no NVML, no GPU in the inventory, gpu.devices
// naming a GPU the host lacks, a rank past CUDA_VISIBLE_DEVICES) falls
// back to host staging with a fixed sentence that guesses at the cause;
// the Placement's own Why, which says what is wrong, is dropped. With
// gpu.place: false the daemon's placement view says only "gpu.place is
// false", so the real cause is shown nowhere.
func TestStagerUnplacedSaysWhy(t *testing.T) {
	cudatest.Build(t)
	dir := t.TempDir()
	p, err := shm.Create(shm.Config{Dir: dir, Name: "r0", Slots: 3, SlotSize: 1 << 20,
		Fields: []shm.Field{{Name: "b", Kind: shm.Dense, DType: shm.Uint8}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { p.Close(); p.Remove() }()
	var log bytes.Buffer
	// what daemon.stagingPlacement does with gpu.devices: ["7"] on a
	// one-GPU host
	_, err = MapRanks(1, []string{"7"}, "", []GPU{{Index: 0, UUID: "GPU-fake", PCIBusID: "0000:3b:00.0", NUMANode: -1}})
	if err == nil {
		t.Fatal("MapRanks took a GPU index the host lacks")
	}
	why := err.Error()
	st := NewStager(StagerConfig{Placement: Unplaced(1, why), Log: slog.New(slog.NewTextHandler(&log, nil))})
	defer st.Close()
	s, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s.SetRows(1)
	if err := s.AddTensor(0, shm.RoleDense, shm.Uint8, []byte{1}, 1); err != nil {
		t.Fatal(err)
	}
	if err := st.Stage(context.Background(), 0, p, s); err != nil {
		t.Fatal(err)
	}
	got := st.Status()
	if len(got) != 1 || got[0].Mode != "host" {
		t.Fatalf("status %+v", got)
	}
	if !strings.Contains(got[0].Why, why) || !strings.Contains(log.String(), "names no GPU of this host") {
		t.Fatalf("fallback reason %q (log %q): want the placement's reason %q in it", got[0].Why, log.String(), why)
	}
}
