package engine

import (
	"slices"
	"testing"
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
