//go:build linux && cgo

package daemon

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lastmile/lastmile/cuda/cudatest"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/gpu"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
	"github.com/prometheus/client_golang/prometheus"
)

// TestDeviceStagingJob runs a 2-rank job with gpu.staging: device through
// the engine with the daemon's stager on the fake libcuda: every batch is
// copied before it is published, the handles are announced, status and
// metrics say "device", and the end of the run frees, then unregisters.
// With the registration failing, or a sticky error at the third copy
// (which makes the GPU's context, shared by both ranks, unusable), each
// rank falls back to host staging with a warning, and the job still
// delivers every batch.
func TestDeviceStagingJob(t *testing.T) {
	for _, fail := range []string{"", "cuMemHostRegister_v2=1", "cuMemcpyHtoDAsync_v2=700@3"} {
		t.Run("fail="+fail, func(t *testing.T) {
			f := cudatest.Build(t)
			f.Fail(t, fail)
			d, logs := gpuDaemon(t, func() ([]gpu.GPU, error) {
				return []gpu.GPU{{Index: 0, UUID: "GPU-a", PCIBusID: "0000:3b:00.0", NUMANode: -1}}, nil
			})
			dir := t.TempDir()
			abs, _ := filepath.Abs("../testdata/small")
			sp, err := spec.Parse("job.yaml", []byte("version: 1\ninputs: ["+abs+"]\ncolumns: [row_id]\nbatch: {size: 1000, last: pad}\n"+
				"world_size: 2\nring: {dir: "+dir+", name: dev, slots: 3}\ngpu: {staging: device, place: false}\n"))
			if err != nil {
				t.Fatal(err)
			}
			j := &Job{d: d, id: "dev", name: "dev", spec: sp, local: sp.WorldSize, log: d.log}
			st := j.stagerFor()
			if st == nil {
				t.Fatal("no stager for staging: device")
			}
			var (
				wg        sync.WaitGroup
				mu        sync.Mutex
				got       = map[int]int{}
				announced = map[int]bool{}
			)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stats, err := engine.Run(ctx, sp, engine.Options{Linger: true, Stage: st, Ready: func(rings []string) {
				for r, name := range rings {
					wg.Add(1)
					go func() {
						defer wg.Done()
						c, err := shm.Open(dir, name)
						if err != nil {
							t.Error(err)
							return
						}
						defer c.Close()
						for {
							if _, err := c.Next(ctx); err != nil {
								if !errors.Is(err, io.EOF) {
									t.Error(err)
								}
								return
							}
							b, _, _ := c.Announcement()
							a, ok, _ := gpu.ParseAnnouncement(b)
							mu.Lock()
							got[r]++
							announced[r] = ok && a.Slots == 3 && a.PCIBusID == "0000:3b:00.0"
							mu.Unlock()
							c.Release()
						}
					}()
				}
			}})
			wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			copies := len(cudatest.Find(f.Calls(t, false), "cuMemcpyHtoDAsync_v2"))
			view := j.gpuView().Device
			if len(view) != 2 {
				t.Fatalf("status: %+v", view)
			}
			reg := prometheus.NewRegistry()
			d.jobs[j.id] = j
			reg.MustRegister(stagingCollector{d})
			mfs, _ := reg.Gather()
			if fail == "" {
				if int64(copies) != stats.Batches || !announced[0] || !announced[1] || got[0]+got[1] != int(stats.Batches) {
					t.Fatalf("%d copies for %d batches; announced %v; got %v", copies, stats.Batches, announced, got)
				}
				for _, v := range view {
					if v.Mode != "device" || int64(v.Staged)*2 != stats.Batches {
						t.Fatalf("status %+v", v)
					}
				}
				if len(mfs) != 2 || mfs[0].GetMetric()[0].GetGauge().GetValue() != 1 && mfs[1].GetMetric()[0].GetGauge().GetValue() != 1 {
					t.Fatalf("metrics %v", mfs)
				}
			} else {
				wantCopies, why := 0, "cuMemHostRegister"
				if strings.HasPrefix(fail, "cuMemcpy") {
					wantCopies, why = 3, "CUDA_ERROR_ILLEGAL_ADDRESS" // the third failed; the other rank's next call finds the context unusable
				}
				if copies != wantCopies || announced[0] || announced[1] || got[0]+got[1] != int(stats.Batches) {
					t.Fatalf("after %s: %d copies, announced at the end %v, got %v of %d", fail, copies, announced, got, stats.Batches)
				}
				for _, v := range view {
					if v.Mode != "host" || !strings.Contains(v.Why, why) {
						t.Fatalf("status %+v, want host because of %s", v, why)
					}
				}
				if n := strings.Count(logs.String(), "falls back to host staging"); n != 2 {
					t.Fatalf("%d fallback warnings, want one per rank:\n%s", n, logs)
				}
			}
			before := len(f.Calls(t, false))
			j.closeStager(st)
			names := cudatest.Names(f.Calls(t, false)[before:])
			free, unreg := indexOf(names, "cuMemFree_v2"), indexOf(names, "cuMemHostUnregister")
			if fail == "" && (free < 0 || unreg < free) {
				t.Fatalf("end of run: %v; want the device slots freed, then the rings unregistered", names)
			}
			if indexOf(names, "cuDevicePrimaryCtxRelease_v2") != len(names)-1 {
				t.Fatalf("end of run: %v; want the context released last", names)
			}
		})
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
