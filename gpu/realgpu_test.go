//go:build linux && cgo

package gpu_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/cuda"
	"github.com/lastmile/lastmile/gpu"
	"github.com/lastmile/lastmile/shm"
)

var realGPU = flag.Bool("gpu", false, "run the tests that need a real NVIDIA GPU and driver (make gpu-test)")

// TestRealGPUCheck runs the self-test on a real GPU and wants every check
// to pass: NVML lists the GPUs, the ring registers in place, and the
// registered ring copies at 0.9x the pinned reference or better.
func TestRealGPUCheck(t *testing.T) {
	if !*realGPU {
		t.Skip("needs a GPU: run with -gpu (make gpu-test)")
	}
	r, err := gpu.Check(context.Background(), gpu.CheckConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if r.NoGPU != "" {
		t.Skip(r.NoGPU)
	}
	for _, m := range r.Measurements {
		t.Logf("device %d  %-36s node %2d  %8d bytes  %6.2f GB/s", m.CUDADevice, m.Source, m.NUMANode, m.Bytes, m.GBps)
	}
	for _, c := range r.Checks {
		if !c.Pass {
			t.Errorf("FAIL %s: %s", c.Name, c.Detail)
		} else if strings.Contains(c.Name, "pinned") {
			t.Logf("PASS %s: %s", c.Name, c.Detail)
		}
	}
}

// TestRealGPUStager stages batches of a real ring through the real driver
// (device staging's daemon side) and reads a device slot back.
func TestRealGPUStager(t *testing.T) {
	if !*realGPU {
		t.Skip("needs a GPU: run with -gpu (make gpu-test)")
	}
	d, err := cuda.Open(cuda.Config{})
	if err != nil {
		t.Skip(err)
	}
	info, err := d.Info(0)
	if err != nil {
		t.Fatal(err)
	}
	// on tmpfs, as rings are: the kernel pins no shared disk-file pages
	dir, err := os.MkdirTemp(shm.DefaultDir(), "lastmile-gpu-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	p, err := shm.Create(shm.Config{Dir: dir, Name: "real", Slots: 3, SlotSize: 8 << 20,
		Fields: []shm.Field{{Name: "b", Kind: shm.Dense, DType: shm.Uint8}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Remove()
	defer p.Close()
	c, err := shm.Open(dir, "real")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st := gpu.NewStager(gpu.StagerConfig{Placement: []gpu.Placement{{PCIBusID: info.PCIBusID}}, Generation: 1})
	ctx := context.Background()
	for seq := range 5 {
		s, err := p.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.SetRows(4 << 20)
		if err := s.AddTensor(0, shm.RoleDense, shm.Uint8, bytes.Repeat([]byte{byte(seq + 1)}, 4<<20), 4<<20); err != nil {
			t.Fatal(err)
		}
		if err := st.Stage(ctx, 0, p, s); err != nil {
			t.Fatal(err)
		}
		if err := p.Publish(s); err != nil {
			t.Fatal(err)
		}
		b, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tn := b.Tensor("b", shm.RoleDense)
		data := tn.Data
		cc, ptr, ok := st.DeviceSlot(0, seq%3)
		if !ok {
			t.Fatalf("not device-staged: %+v", st.Status())
		}
		back := make([]byte, 4<<20)
		if err := cc.CopyDtoH(back, ptr+cuda.DevicePtr(tn.Offset)); err != nil || !bytes.Equal(back, data) {
			t.Fatalf("batch %d: the device slot differs from the ring slot (%v)", seq, err)
		}
		c.Release()
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}
