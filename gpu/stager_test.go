//go:build linux && cgo

package gpu_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/cuda/cudatest"
	"github.com/lastmile/lastmile/gpu"
	"github.com/lastmile/lastmile/shm"
)

// stagerRig is a Stager over real rings, one per rank, on the fake.
type stagerRig struct {
	f     *cudatest.Fake
	st    *gpu.Stager
	rings []*shm.Producer
	cons  []*shm.Consumer
	log   *bytes.Buffer
}

func newStagerRig(t *testing.T, ranks int, place []gpu.Placement) *stagerRig {
	t.Helper()
	rig := &stagerRig{f: cudatest.Build(t), log: &bytes.Buffer{}}
	dir := t.TempDir()
	for r := range ranks {
		name := "rank" + string(rune('0'+r))
		p, err := shm.Create(shm.Config{Dir: dir, Name: name, Slots: 3, SlotSize: 1 << 20,
			Fields: []shm.Field{{Name: "b", Kind: shm.Dense, DType: shm.Uint8}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close(); p.Remove() })
		c, err := shm.Open(dir, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		rig.rings, rig.cons = append(rig.rings, p), append(rig.cons, c)
	}
	rig.st = gpu.NewStager(gpu.StagerConfig{Placement: place, Generation: 99,
		Log: slog.New(slog.NewTextHandler(rig.log, nil))})
	return rig
}

// placed puts n ranks on the fake's device 0.
func placed(n int) []gpu.Placement {
	p := make([]gpu.Placement, n)
	for r := range p {
		p[r] = gpu.Placement{Rank: r, GPU: 0, PCIBusID: "0000:3B:00.0", NUMANode: -1}
	}
	return p
}

// publish packs, stages and publishes one batch of rank r, then takes
// and releases it as the trainer would.
func (rig *stagerRig) publish(t *testing.T, r int) {
	t.Helper()
	ctx := context.Background()
	p := rig.rings[r]
	s, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.SetRows(1000)
	if err := s.AddTensor(0, shm.RoleDense, shm.Uint8, bytes.Repeat([]byte{byte(s.Seq())}, 1000), 1000); err != nil {
		t.Fatal(err)
	}
	if err := rig.st.Stage(ctx, r, p, s); err != nil {
		t.Fatalf("Stage returned %v: a CUDA failure must not fail the run", err)
	}
	if p.Stats().Tail != s.Seq() {
		t.Fatal("Stage published the batch")
	}
	if err := p.Publish(s); err != nil {
		t.Fatal(err)
	}
	if _, err := rig.cons[r].Next(ctx); err != nil {
		t.Fatal(err)
	}
	rig.cons[r].Release()
}

func (rig *stagerRig) announced(t *testing.T, r int) (gpu.Announcement, bool) {
	t.Helper()
	b, _, err := rig.cons[r].Announcement()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		return gpu.Announcement{}, false
	}
	a, ok, err := gpu.ParseAnnouncement(b)
	if err != nil || !ok {
		t.Fatalf("announcement: %v, %v", ok, err)
	}
	return a, true
}

// TestStagerDevice: two ranks on one GPU share one context; each batch is
// copied, its event recorded and the copy waited for before the publish;
// the handles are announced before the first publish; Close frees, then
// unregisters (the mapping still there), then releases the context.
func TestStagerDevice(t *testing.T) {
	rig := newStagerRig(t, 2, placed(2))
	for i := range 4 {
		for r := range 2 {
			before := len(rig.f.Calls(t, false))
			rig.publish(t, r)
			got := cudatest.Names(rig.f.Calls(t, false)[before:])
			want := []string{"cuMemcpyHtoDAsync_v2", "cuEventRecord", "cuStreamSynchronize"}
			if i == 0 { // the rank's setup first, its announcement among it
				if len(got) < 3 || index(got, "cuIpcGetMemHandle") < 0 {
					t.Fatalf("first batch of rank %d: calls %v", r, got)
				}
				got = got[len(got)-3:]
			}
			if !slices.Equal(got, want) {
				t.Fatalf("batch %d of rank %d: calls %v, want %v", i, r, got, want)
			}
			a, ok := rig.announced(t, r)
			if !ok || a.Generation != 99 || a.Slots != 3 || a.PCIBusID != "0000:3b:00.0" {
				t.Fatalf("rank %d announces %+v (%v)", r, a, ok)
			}
		}
	}
	calls := rig.f.Calls(t, false)
	if n := len(cudatest.Find(calls, "cuDevicePrimaryCtxRetain")); n != 1 {
		t.Fatalf("%d contexts retained for two ranks on one GPU, want 1", n)
	}
	for _, c := range cudatest.Find(calls, "cuMemcpyHtoDAsync_v2") {
		if c.Args["pinned"] != "1" {
			t.Fatalf("a copy from unregistered memory: %v", c.Args)
		}
	}
	for _, s := range rig.st.Status() {
		if s.Mode != "device" || s.Staged != 4 {
			t.Fatalf("status %+v", s)
		}
	}
	before := len(calls)
	if err := rig.st.Close(); err != nil {
		t.Fatal(err)
	}
	closing := rig.f.Calls(t, false)[before:]
	names := cudatest.Names(closing)
	for _, u := range cudatest.Find(closing, "cuMemHostUnregister") {
		if u.Args["mapped"] != "1" {
			t.Fatal("a ring was unmapped before it was unregistered")
		}
	}
	free, unreg, rel := index(names, "cuMemFree_v2"), index(names, "cuMemHostUnregister"), index(names, "cuDevicePrimaryCtxRelease_v2")
	if free < 0 || unreg < free || rel < unreg || rel != len(names)-1 {
		t.Fatalf("close: %v; want free, unregister, then the context's release last", names)
	}
	if strings.Contains(rig.log.String(), "WARN") {
		t.Fatalf("warnings: %s", rig.log)
	}
}

// TestStagerFallback: a failure at any step of a rank's setup, or a
// sticky error mid-run, sends that rank to host staging: a warning, no
// announcement, no further CUDA copies, Stage still nil, status "host".
func TestStagerFallback(t *testing.T) {
	for _, tc := range []struct {
		name, fail string
		place      []gpu.Placement
		after      int // batches staged on the device before the fallback
		want       string
	}{
		{"register", "cuMemHostRegister_v2=1", placed(1), 0, "cuMemHostRegister_v2"},
		{"alloc", "cuMemAlloc_v2=2", placed(1), 0, "CUDA_ERROR_OUT_OF_MEMORY"},
		{"ipc mem handle", "cuIpcGetMemHandle=1", placed(1), 0, "cuIpcGetMemHandle"},
		{"ipc event handle", "cuIpcGetEventHandle=1@2", placed(1), 0, "cuIpcGetEventHandle"},
		{"context", "cuDevicePrimaryCtxRetain=2", placed(1), 0, "cuDevicePrimaryCtxRetain"},
		{"no driver", "cuInit=100", placed(1), 0, "cuInit"},
		{"unplaced", "", gpu.Unplaced(1, "no NVML"), 0, "not placed on a GPU"},
		{"unknown bus", "", []gpu.Placement{{PCIBusID: "0000:99:00.0"}}, 0, "no CUDA device has PCI bus id 0000:99:00.0"},
		{"sticky copy", "cuMemcpyHtoDAsync_v2=700@3", placed(1), 2, "CUDA_ERROR_ILLEGAL_ADDRESS"},
		{"sticky sync", "cuStreamSynchronize=719@2", placed(1), 1, "CUDA_ERROR_LAUNCH_FAILED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig := newStagerRig(t, 1, tc.place)
			rig.f.Fail(t, tc.fail)
			for range tc.after {
				rig.publish(t, 0)
				if _, ok := rig.announced(t, 0); !ok {
					t.Fatal("no announcement before the failure")
				}
			}
			_, seq, _ := rig.cons[0].Announcement()
			rig.publish(t, 0) // the failing batch: published all the same
			copies := len(cudatest.Find(rig.f.Calls(t, false), "cuMemcpyHtoDAsync_v2"))
			rig.publish(t, 0)
			rig.publish(t, 0)
			if n := len(cudatest.Find(rig.f.Calls(t, false), "cuMemcpyHtoDAsync_v2")); n != copies {
				t.Fatalf("%d copies after the fallback", n-copies)
			}
			if a, ok := rig.announced(t, 0); ok {
				t.Fatalf("still announced after the fallback: %+v", a)
			}
			if _, now, _ := rig.cons[0].Announcement(); tc.after > 0 && now == seq {
				t.Fatal("the withdrawal did not change announce_seq")
			}
			st := rig.st.Status()
			if len(st) != 1 || st[0].Mode != "host" || st[0].Staged != uint64(tc.after) || !strings.Contains(st[0].Why, tc.want) {
				t.Fatalf("status %+v, want host after %d batches, why containing %q", st, tc.after, tc.want)
			}
			if l := rig.log.String(); strings.Count(l, "level=WARN") != 1 || !strings.Contains(l, "falls back to host staging") || !strings.Contains(l, "ring=rank0") {
				t.Fatalf("log: %s", l)
			}
			if calls := rig.f.Calls(t, false); tc.after == 0 && succeeded(cudatest.Find(calls, "cuMemAlloc_v2")) != len(cudatest.Find(calls, "cuMemFree_v2")) {
				t.Fatalf("device slots never announced are kept after the fallback: %v", cudatest.Names(calls))
			}
			rig.st.Close() // errors expected after a sticky failure; must not panic or hang
			for _, u := range cudatest.Find(rig.f.Calls(t, false), "cuMemHostUnregister") {
				if u.Args["mapped"] != "1" {
					t.Fatal("a ring was unmapped before it was unregistered")
				}
			}
		})
	}
}

func succeeded(calls []cudatest.Call) int {
	n := 0
	for _, c := range calls {
		if c.Result == 0 {
			n++
		}
	}
	return n
}

// TestStagerCloseKeepsContextOfLeakedRing: a ring whose Close could not
// wait for its stream leaves its device slots and mapping in place
// (DeviceRing.Close). Releasing the primary context afterwards, its last
// reference, would destroy them all the same under a copy that may still
// run: the Stager keeps the context retained.
func TestStagerCloseKeepsContextOfLeakedRing(t *testing.T) {
	rig := newStagerRig(t, 1, placed(1))
	rig.publish(t, 0)
	rig.publish(t, 0)
	before := len(rig.f.Calls(t, false))
	rig.f.Fail(t, "cuStreamSynchronize=999")
	if err := rig.st.Close(); err == nil {
		t.Fatal("Close: no error although its stream wait failed")
	}
	names := cudatest.Names(rig.f.Calls(t, false)[before:])
	for _, n := range []string{"cuMemFree_v2", "cuMemHostUnregister", "cuDevicePrimaryCtxRelease_v2"} {
		if index(names, n) >= 0 {
			t.Fatalf("close after a failed stream wait: %v; want no %s", names, n)
		}
	}
}
