package engine_test

import (
	"testing"

	"github.com/lastmile/lastmile/engine"
)

// TestPropHostsResume: resuming each host of a multi-host world at
// every step of every epoch gives that host's uninterrupted tail.
func TestPropHostsResume(t *testing.T) {
	fails, n := 0, 0
	for _, last := range []string{"pad", "drop"} {
		for _, buf := range []int{0, 777} {
			for _, hosts := range []int{2, 3} {
				for _, pipe := range []string{"", rvFilterEmpties} {
					c := rvCfg{last: last, buf: buf, world: hosts * 2, epochs: 2, size: 150, pipe: pipe, mur: 0, units: true, workers: 2}
					if !sampled(&n, 3) {
						continue
					}
					for h := 0; h < hosts; h++ {
						hs := engine.Hosts{Count: hosts, Index: h}
						full, _, err := rvRun(t, c, engine.Options{Hosts: hs})
						if err != nil {
							t.Logf("%v host %d: %v", c, h, err)
							continue
						}
						per := 0
						for _, cu := range full[0].cur {
							if cu.Epoch == 0 {
								per++
							}
						}
						for e := uint64(0); e < 2; e++ {
							for k := 0; k <= per; k++ {
								if !resumeAt(k, per) {
									continue
								}
								cur := []engine.Cursor{{Epoch: e, Batch: uint64(k)}, {Epoch: e, Batch: uint64(k)}}
								got, _, err := rvRun(t, c, engine.Options{Hosts: hs, Resume: cur})
								if err != nil {
									t.Errorf("%v host %d resume %v: %v", c, h, cur, err)
									fails++
									continue
								}
								want := []rvStream{rvTail(full[0], cur[0]), rvTail(full[1], cur[1])}
								if d := rvDiff(got, want); d != "" {
									t.Errorf("%v host %d/%d resume %v (%d steps an epoch): %s", c, h, hosts, cur, per, d)
									fails++
								}
								if fails > 12 {
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

// TestHostsPadResumeInPaddedSteps: with last: pad and two hosts, the
// host with fewer rows pads whole steps at the end of each epoch. Resumed
// at the second of those padded steps, its ranks get other pad rows than
// the uninterrupted run gave there: the resumed batcher skips the real
// tail rows (the carry of the first padded step) and restarts padNext at
// 0, while the uninterrupted run had advanced it.
func TestHostsPadResumeInPaddedSteps(t *testing.T) {
	c := rvCfg{last: "pad", buf: 0, world: 4, epochs: 1, size: 150, mur: 0, units: true, workers: 1}
	hs := engine.Hosts{Count: 2, Index: 1}
	full, _, err := rvRun(t, c, engine.Options{Hosts: hs})
	if err != nil {
		t.Fatal(err)
	}
	per := len(full[0].cur)
	// The last step of the epoch (18 steps here; this host runs out of
	// real rows before it, so the steps before it are padded too).
	cur := []engine.Cursor{{Epoch: 0, Batch: uint64(per - 1)}, {Epoch: 0, Batch: uint64(per - 1)}}
	got, _, err := rvRun(t, c, engine.Options{Hosts: hs, Resume: cur})
	if err != nil {
		t.Fatal(err)
	}
	want := []rvStream{rvTail(full[0], cur[0]), rvTail(full[1], cur[1])}
	if d := rvDiff(got, want); d != "" {
		t.Fatalf("host 1 of 2 resumed at %v: %s", cur, d)
	}
}
