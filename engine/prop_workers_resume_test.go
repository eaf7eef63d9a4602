package engine_test

import (
	"testing"

	"github.com/lastmile/lastmile/engine"
)

const rvFilterEmpties = "  - filter: \"row_id < 2100 or row_id >= 5600\"\n  - sample: {key: row_id, rates: [{rate: 0.6}]}\n"

func TestPropWorkers(t *testing.T) {
	fails, n := 0, 0
	for _, last := range []string{"drop", "pad"} {
		for _, buf := range []int{0, 777, 4096} {
			for _, world := range []int{1, 3, 8} {
				for _, pipe := range []string{"", rvFilterEmpties} {
					for _, mur := range []int{333, 0} {
						for _, cache := range []bool{false, true} {
							c := rvCfg{last: last, buf: buf, world: world, epochs: 3, size: 61, pipe: pipe, mur: mur, cache: cache, units: true, workers: 1}
							if cache && pipe == "" || !sampled(&n, 6) {
								continue
							}
							want, _, err := rvRun(t, c, engine.Options{})
							if err != nil {
								t.Fatalf("%v: %v", c, err)
							}
							// equal batch counts
							for r := range want {
								if len(want[r].hash) != len(want[0].hash) {
									t.Errorf("%v: rank %d has %d batches, rank 0 %d", c, r, len(want[r].hash), len(want[0].hash))
								}
							}
							for _, w := range []int{3, 7} {
								c.workers = w
								got, _, err := rvRun(t, c, engine.Options{})
								if err != nil {
									t.Fatalf("%v: %v", c, err)
								}
								if d := rvDiff(got, want); d != "" {
									t.Errorf("%v: %s", c, d)
									fails++
								}
							}
							if fails > 10 {
								t.FailNow()
							}
						}
					}
				}
			}
		}
	}
}

func TestPropResume(t *testing.T) {
	fails, n := 0, 0
	for _, last := range []string{"drop", "pad"} {
		for _, buf := range []int{0, 777} {
			for _, world := range []int{1, 3, 8} {
				for _, pipe := range []string{"", rvFilterEmpties} {
					for _, cache := range []bool{false, true} {
						if cache && pipe == "" || !sampled(&n, 4) {
							continue
						}
						c := rvCfg{last: last, buf: buf, world: world, epochs: 3, size: 1500 / world, pipe: pipe, mur: 333, cache: cache, units: true, workers: 3}
						full, _, err := rvRun(t, c, engine.Options{})
						if err != nil {
							t.Fatalf("%v: %v", c, err)
						}
						per := 0
						for _, cu := range full[0].cur {
							if cu.Epoch == 0 {
								per++
							}
						}
						for e := uint64(0); e <= 3; e++ {
							for k := 0; k <= per; k++ {
								if e == 3 && k > 0 {
									break
								}
								if !resumeAt(k, per) {
									continue
								}
								cur := make([]engine.Cursor, world)
								for r := range cur {
									cur[r] = engine.Cursor{Epoch: e, Batch: uint64(k)}
									if r%2 == 1 && k > 0 {
										cur[r].Batch = uint64(k - 1)
									}
								}
								got, _, err := rvRun(t, c, engine.Options{Resume: cur})
								if err != nil {
									t.Errorf("%v resume %v: %v", c, cur, err)
									fails++
									continue
								}
								want := make([]rvStream, world)
								for r := range want {
									want[r] = rvTail(full[r], cur[r])
								}
								if d := rvDiff(got, want); d != "" {
									t.Errorf("%v resume %v: %s", c, cur, d)
									fails++
								}
								if fails > 10 {
									t.FailNow()
								}
							}
						}
					}
				}
			}
		}
	}
}
