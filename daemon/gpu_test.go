package daemon

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/lastmile/lastmile/cuda"
	"github.com/lastmile/lastmile/gpu"
	"github.com/lastmile/lastmile/spec"
	"github.com/prometheus/client_golang/prometheus"
)

// gpuDaemon is a daemon whose GPU inventory is inv, logging into a buffer.
func gpuDaemon(t *testing.T, inv func() ([]gpu.GPU, error)) (*Daemon, *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.StateDir, cfg.ShmDir, cfg.Socket, cfg.Metrics = filepath.Join(dir, "state"), filepath.Join(dir, "shm"), filepath.Join(dir, "s"), "off"
	cfg.GPU.Inventory = inv
	buf := &syncBuffer{}
	d, err := New(cfg, slog.New(slog.NewTextHandler(buf, nil)), nil, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	return d, buf
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func gpuJob(t *testing.T, d *Daemon, id, gpuSection string) *Job {
	t.Helper()
	sp, err := spec.Parse("job.yaml", []byte("version: 1\ninputs: [x.parquet]\nbatch: {size: 8}\nworld_size: 3\n"+gpuSection+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	j := &Job{d: d, id: id, name: id, spec: sp, local: sp.WorldSize, log: d.log}
	j.client = d.sched.NewClient(1)
	d.jobs[id] = j
	return j
}

func TestGPUPlacement(t *testing.T) {
	node := gpu.Nodes()[0]
	d, logs := gpuDaemon(t, func() ([]gpu.GPU, error) {
		return []gpu.GPU{
			{Index: 0, UUID: "GPU-a", NUMANode: node, CPUs: []int{0}},
			{Index: 1, UUID: "GPU-b", NUMANode: node, CPUs: []int{1}},
		}, nil
	})
	j := gpuJob(t, d, "vis", `gpu: {visible_devices: "1,0"}`)
	place := j.placeRing()
	for r := 0; r < 3; r++ {
		ran := false
		if err := place(r, func() error { ran = true; return nil }); err != nil || !ran {
			t.Fatalf("rank %d: PlaceRing = %v, create ran: %v", r, err, ran)
		}
	}
	v := j.gpuView()
	if v.Staging != "auto" || len(v.Placement) != 3 {
		t.Fatalf("view: %+v", v)
	}
	for r, want := range []int{1, 0, -1} {
		p := v.Placement[r]
		if p.GPU != want || (want >= 0 && p.NUMANode != node) || (want < 0 && p.Why == "") {
			t.Errorf("rank %d placed %+v, want GPU %d", r, p, want)
		}
	}
	if !strings.Contains(logs.String(), "rank not placed") {
		t.Errorf("the unplaced rank 2 was not logged:\n%s", logs)
	}

	// Metrics: one info series per placed rank.
	reg := prometheus.NewRegistry()
	reg.MustRegister(gpuCollector{d})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var series []string
	for _, f := range mfs {
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			series = append(series, fmt.Sprintf("%s rank=%s gpu=%s uuid=%s", f.GetName(), l["rank"], l["gpu"], l["uuid"]))
		}
	}
	sort.Strings(series) // the registry sorts by label values
	want := fmt.Sprint([]string{"lastmile_rank_gpu_info rank=0 gpu=1 uuid=GPU-b", "lastmile_rank_gpu_info rank=1 gpu=0 uuid=GPU-a"})
	if fmt.Sprint(series) != want {
		t.Errorf("metrics %v, want %v", series, want)
	}
}

// TestGPUPlacementWithoutNVML: no inventory warns once, however many jobs
// start, and places nothing; a node the kernel refuses leaves the ring
// unplaced, not the job failed.
func TestGPUPlacementWithoutNVML(t *testing.T) {
	d, logs := gpuDaemon(t, func() ([]gpu.GPU, error) {
		return nil, fmt.Errorf("%w: ERROR_LIBRARY_NOT_FOUND", gpu.ErrNoNVML)
	})
	for _, id := range []string{"a", "b"} {
		j := gpuJob(t, d, id, "")
		if err := j.placeRing()(0, func() error { return nil }); err != nil {
			t.Fatal(err)
		}
		for _, p := range j.gpuView().Placement {
			if p.GPU != -1 || !strings.Contains(p.Why, "no GPU inventory") {
				t.Fatalf("job %s placed %+v without an inventory", id, p)
			}
		}
	}
	if n := strings.Count(logs.String(), "no GPU inventory"); n != 1 {
		t.Fatalf("%d warnings about the missing inventory, want 1:\n%s", n, logs)
	}

	d, logs = gpuDaemon(t, func() ([]gpu.GPU, error) { return []gpu.GPU{{Index: 0, UUID: "GPU-a", NUMANode: 900}}, nil })
	j := gpuJob(t, d, "bad", `gpu: {devices: ["0", "0", "0"]}`)
	ran := false
	if err := j.placeRing()(0, func() error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("a refused NUMA policy: PlaceRing = %v, ring created: %v", err, ran)
	}
	if p := j.gpuView().Placement[0]; p.NUMANode != -1 || !strings.Contains(logs.String(), "creating it unplaced") {
		t.Fatalf("rank 0 after a refused policy: %+v\n%s", p, logs)
	}
}

// TestGPUsWarnWhenRingsCannotBePinned: with GPUs present and shm_dir on a
// disk filesystem, whose shared pages the kernel will not pin for CUDA,
// lastmiled says once that staging will fall back, and why; on tmpfs it
// says nothing.
func TestGPUsWarnWhenRingsCannotBePinned(t *testing.T) {
	const warning = "rings cannot be registered with CUDA"
	for _, tc := range []struct {
		name string
		dir  func(t *testing.T) string
		want int
	}{
		{"disk", func(t *testing.T) string {
			d := t.TempDir()
			if cuda.PinnableDir(d) == nil {
				t.Skipf("%s is on tmpfs here", d)
			}
			return d
		}, 1},
		{"tmpfs", func(t *testing.T) string {
			if cuda.PinnableDir("/dev/shm") != nil {
				t.Skip("no tmpfs at /dev/shm")
			}
			d, err := os.MkdirTemp("/dev/shm", "lastmile-daemon-test-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, logs := gpuDaemon(t, func() ([]gpu.GPU, error) { return []gpu.GPU{{Index: 0, UUID: "GPU-a", NUMANode: -1}}, nil })
			d.cfg.ShmDir = tc.dir(t)
			for _, id := range []string{"a", "b"} {
				if _, err := d.gpus(); err != nil {
					t.Fatalf("job %s: %v", id, err)
				}
			}
			if n := strings.Count(logs.String(), warning); n != tc.want {
				t.Fatalf("%d warnings, want %d:\n%s", n, tc.want, logs)
			}
			if tc.want > 0 && !strings.Contains(logs.String(), "/dev/shm") {
				t.Errorf("the warning does not say where rings can go:\n%s", logs)
			}
		})
	}
}
