package engine_test

import (
	"testing"

	"github.com/lastmile/lastmile/engine"
)

const rvGroups = rvFilterEmpties + "  - map: {d2: \"dense_0 * 2\"}\n  - stack: {output: g, columns: [dense_0, d2]}\n  - jagged: {output: s, keys: [seq_0]}\n"

// The reference paths (windows and cache copying every row, no pruning,
// no late fetch) give the bytes of the fast ones, with feature groups.
func TestTogglesByteIdentical(t *testing.T) {
	n := 0
	for _, last := range []string{"drop", "pad"} {
		for _, buf := range []int{0, 777} {
			for _, cache := range []bool{false, true} {
				c := rvCfg{last: last, buf: buf, world: 3, epochs: 3, size: 89, pipe: rvGroups, mur: 333, cache: cache, units: true, workers: 3}
				if !sampled(&n, 3) {
					continue
				}
				want, _, err := rvRun(t, c, engine.Options{})
				if err != nil {
					t.Fatal(err)
				}
				for i, set := range []func(bool) bool{engine.SetCopyWindowForTest, engine.SetCopyCacheForTest, engine.SetNeverPruneForTest, engine.SetNeverDeferForTest} {
					old := set(true)
					got, _, err := rvRun(t, c, engine.Options{})
					set(old)
					if err != nil {
						t.Fatal(err)
					}
					if d := rvDiff(got, want); d != "" {
						t.Errorf("%v toggle %d: %s", c, i, d)
					}
				}
				rvResumeAll(t, c, engine.Options{})
			}
		}
	}
}
