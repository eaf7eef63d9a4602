package engine_test

import (
	"testing"

	"github.com/lastmile/lastmile/engine"
)

// Hosts: batches independent of workers and cache; resume exact with
// the cache and sliced units.
func TestPropHostsWorkersCache(t *testing.T) {
	n := 0
	for _, last := range []string{"pad", "drop"} {
		for _, buf := range []int{0, 500} {
			for _, hosts := range []int{2, 4} {
				for _, cache := range []bool{false, true} {
					c := rvCfg{last: last, buf: buf, world: hosts * 2, epochs: 3, size: 70, pipe: rvFilterEmpties, mur: 333, units: true, workers: 1, cache: cache}
					if !sampled(&n, 3) {
						continue
					}
					for h := 0; h < hosts; h++ {
						hs := engine.Hosts{Count: hosts, Index: h}
						want, _, err := rvRun(t, c, engine.Options{Hosts: hs})
						if err != nil {
							t.Logf("%v host %d: %v", c, h, err)
							continue
						}
						c3 := c
						c3.workers = 3
						got, _, err := rvRun(t, c3, engine.Options{Hosts: hs})
						if err != nil {
							t.Fatal(err)
						}
						if d := rvDiff(got, want); d != "" {
							t.Errorf("%v host %d workers 3: %s", c, h, d)
						}
						per := 0
						for _, cu := range want[0].cur {
							if cu.Epoch == 1 {
								per++
							}
						}
						for _, cur := range [][]engine.Cursor{
							{{Epoch: 1, Batch: uint64(per - 1)}, {Epoch: 1, Batch: uint64(per - 2)}},
							{{Epoch: 2, Batch: uint64(per / 2)}, {Epoch: 1, Batch: uint64(per)}},
							{{Epoch: 0, Batch: uint64(per - 3)}, {Epoch: 2, Batch: 0}},
						} {
							got, _, err := rvRun(t, c3, engine.Options{Hosts: hs, Resume: cur})
							if err != nil {
								t.Fatal(err)
							}
							w := []rvStream{rvTail(want[0], cur[0]), rvTail(want[1], cur[1])}
							if d := rvDiff(got, w); d != "" {
								t.Errorf("%v host %d/%d resume %v (%d steps): %s", c, h, hosts, cur, per, d)
							}
						}
					}
				}
			}
		}
	}
}
