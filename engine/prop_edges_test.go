package engine_test

import (
	"testing"

	"github.com/lastmile/lastmile/engine"
)

func rvResumeAll(t *testing.T, c rvCfg, opts engine.Options) {
	t.Helper()
	full, _, err := rvRun(t, c, opts)
	if err != nil {
		t.Fatalf("%v: %v", c, err)
	}
	for r := range full {
		if len(full[r].hash) != len(full[0].hash) {
			t.Errorf("%v: rank %d %d batches, rank 0 %d", c, r, len(full[r].hash), len(full[0].hash))
		}
	}
	per := 0
	for _, cu := range full[0].cur {
		if cu.Epoch == 0 {
			per++
		}
	}
	for e := uint64(0); e <= uint64(c.epochs); e++ {
		for k := 0; k <= per; k++ {
			if !resumeAt(k, per) {
				continue
			}
			cur := make([]engine.Cursor, len(full))
			for r := range cur {
				cur[r] = engine.Cursor{Epoch: e, Batch: uint64(k)}
			}
			o := opts
			o.Resume = cur
			got, _, err := rvRun(t, c, o)
			if err != nil {
				t.Errorf("%v resume %v: %v", c, cur, err)
				return
			}
			want := make([]rvStream, len(full))
			for r := range want {
				want[r] = rvTail(full[r], cur[r])
			}
			if d := rvDiff(got, want); d != "" {
				t.Errorf("%v resume %v: %s", c, cur, d)
				return
			}
		}
	}
}

func TestEdgeKeepResume(t *testing.T) {
	for _, buf := range []int{0, 777} {
		for _, pipe := range []string{"", rvFilterEmpties} {
			rvResumeAll(t, rvCfg{last: "keep", buf: buf, world: 1, epochs: 2, size: 1300, pipe: pipe, mur: 333, units: true, workers: 3}, engine.Options{})
		}
	}
}

func TestEdgeBatchLargerThanRows(t *testing.T) {
	n := 0
	for _, last := range []string{"pad", "drop", "keep"} {
		for _, buf := range []int{0, 4096} {
			for _, pipe := range []string{"", rvFilterEmpties} {
				w := 3
				if last == "keep" {
					w = 1
				}
				if !sampled(&n, 1) {
					continue
				}
				rvResumeAll(t, rvCfg{last: last, buf: buf, world: w, epochs: 2, size: 12000, pipe: pipe, mur: 333, units: true, workers: 2}, engine.Options{})
			}
		}
	}
}

func TestEdgeWorldLargerThanUnits(t *testing.T) {
	n := 0
	for _, last := range []string{"pad", "drop"} {
		for _, pipe := range []string{"", rvFilterEmpties} {
			if !sampled(&n, 1) {
				continue
			}
			rvResumeAll(t, rvCfg{last: last, buf: 500, world: 16, epochs: 2, size: 30, pipe: pipe, mur: 0, units: true, workers: 3}, engine.Options{})
		}
	}
}

func TestEdgeNoUnitShuffle(t *testing.T) {
	for _, last := range []string{"pad", "drop"} {
		c := rvCfg{last: last, buf: 1000, world: 3, epochs: 3, size: 200, pipe: rvFilterEmpties, mur: 333, units: false, workers: 3, cache: true}
		rvResumeAll(t, c, engine.Options{})
		full, _, _ := rvRun(t, c, engine.Options{})
		// epochs must reshuffle
		var e0, e1 string
		for k, cu := range full[0].cur {
			if cu.BatchIndex == 0 && cu.Epoch == 0 {
				e0 = full[0].hash[k]
			}
			if cu.BatchIndex == 0 && cu.Epoch == 1 {
				e1 = full[0].hash[k]
			}
		}
		if e0 == e1 {
			t.Errorf("epoch 1 starts like epoch 0")
		}
	}
}

// The unit arena gives the bytes of the copying path.
func TestEdgeArenaBytes(t *testing.T) {
	for _, last := range []string{"pad", "drop"} {
		for _, world := range []int{1, 3} {
			c := rvCfg{last: last, buf: 0, world: world, epochs: 2, size: 250, mur: 0, units: true, workers: 3}
			want, _, err := rvRun(t, c, engine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ca := c
			ca.arena = true
			got, st, err := rvRun(t, ca, engine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if st.ArenaUnits == 0 {
				t.Errorf("%v: no arena units", c)
			}
			if d := rvDiff(got, want); d != "" {
				t.Errorf("%v arena: %s", c, d)
			}
		}
	}
}

// The unit arena, resumed at every batch.
func TestEdgeArenaResume(t *testing.T) {
	for _, last := range []string{"pad", "drop"} {
		c := rvCfg{last: last, buf: 0, world: 3, epochs: 2, size: 350, mur: 0, units: true, workers: 3, arena: true}
		rvResumeAll(t, c, engine.Options{})
	}
}

// Drops left for Apply (on_long: skip over a late column): resume and
// hosts.
func TestEdgeApplyDropsResume(t *testing.T) {
	n := 0
	pipe := "  - filter: \"row_id < 2100 or row_id >= 5600\"\n  - sequence: {column: seq_0, length: 3, on_long: skip}\n"
	for _, last := range []string{"pad", "drop"} {
		for _, buf := range []int{0, 600} {
			if !sampled(&n, 1) {
				continue
			}
			c := rvCfg{last: last, buf: buf, world: 2, epochs: 2, size: 100, pipe: pipe, mur: 333, units: true, workers: 3, cache: buf > 0}
			rvResumeAll(t, c, engine.Options{})
			for h := 0; h < 2; h++ {
				c2 := c
				c2.world = 4
				rvResumeAll(t, c2, engine.Options{Hosts: engine.Hosts{Count: 2, Index: h}})
			}
		}
	}
}
