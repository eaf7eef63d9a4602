package engine

import (
	"slices"
	"testing"

	"github.com/lastmile/lastmile/decode"
)

// assignUnits deals units so that the hosts' rows end within one unit of
// each other (level, where the largest units first make them so), every
// unit to one host, the same way for the same seed.
func TestAssignUnits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rows   []int64
		hosts  int
		spread int64 // the most the hosts' rows may differ by
	}{
		{"equal units", []int64{700, 700, 700, 700, 700, 700}, 2, 0},
		{"rows in a few units", []int64{0, 700, 0, 0, 700, 0, 5, 700, 0, 0, 0, 700, 5}, 2, 0},
		{"uneven units", []int64{5, 900, 30, 450, 450, 120, 60, 700, 10}, 3, 900},
		{"more hosts than rows", []int64{0, 0, 10, 0}, 4, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range uint64(8) {
				owner := assignUnits(tc.rows, tc.hosts, seed)
				if !slices.Equal(owner, assignUnits(tc.rows, tc.hosts, seed)) {
					t.Fatalf("seed %d: two deals differ", seed)
				}
				load := make([]int64, tc.hosts)
				for u, h := range owner {
					if h < 0 || int(h) >= tc.hosts {
						t.Fatalf("seed %d: unit %d to host %d", seed, u, h)
					}
					load[h] += tc.rows[u]
				}
				if spread := slices.Max(load) - slices.Min(load); spread > tc.spread {
					t.Fatalf("seed %d: hosts' rows %v, more than %d apart", seed, load, tc.spread)
				}
			}
		})
	}
}

// The hosts compare PlanDigest, which leaves out modification times (each
// host's copy of a file has its own); the counts a host keeps hold for its
// files as they were, so their digest covers the times too.
func TestPlanDigest(t *testing.T) {
	plan := &decode.Plan{Units: []decode.Unit{
		{File: "/d/a.parquet", FileSize: 100, ModTime: 1, RowGroup: 0, Rows: 10},
		{File: "/d/a.parquet", FileSize: 100, ModTime: 1, RowGroup: 1, Rows: 5},
	}}
	touched := &decode.Plan{Units: slices.Clone(plan.Units)}
	touched.Units[1].ModTime = 2
	grown := &decode.Plan{Units: slices.Clone(plan.Units)}
	grown.Units[1].Rows = 6
	for _, tc := range []struct {
		name         string
		a, b         *decode.Plan
		mtimes, same bool
	}{
		{"the same plan", plan, plan, true, true},
		{"a file touched, across hosts", plan, touched, false, true},
		{"a file touched, this host's counts", plan, touched, true, false},
		{"a row group grown", plan, grown, false, false},
	} {
		if same := planDigest(tc.a, tc.mtimes) == planDigest(tc.b, tc.mtimes); same != tc.same {
			t.Errorf("%s: digests equal %v, want %v", tc.name, same, tc.same)
		}
	}
	if PlanDigest(plan) != planDigest(plan, false) {
		t.Error("PlanDigest is not the digest without modification times")
	}
}
