package bench

import "testing"

func TestCountSkippable(t *testing.T) {
	cases := []struct {
		name                    string
		rows, size              int
		kept, order             []int32
		pages, skip, skipSorted int
	}{
		{"nothing kept", 10, 4, nil, nil, 3, 3, 0},
		{"every page hit", 8, 2, []int32{0, 3, 5, 6}, nil, 4, 0, 0},
		{"one run", 12, 3, []int32{3, 4, 5}, nil, 4, 3, 0},
		{"last page short", 10, 4, []int32{9}, nil, 3, 2, 0},
		// Kept rows 0 and 5 land together once rows are reordered.
		{"reordered", 6, 2, []int32{0, 5}, []int32{0, 5, 1, 2, 3, 4}, 3, 1, 2},
		{"reordered apart", 4, 2, []int32{0, 1}, []int32{0, 2, 1, 3}, 2, 1, 0},
	}
	for _, c := range cases {
		pages, skip, sorted := countSkippable(c.rows, c.size, c.kept, c.order)
		if pages != c.pages || skip != c.skip || sorted != c.skipSorted {
			t.Errorf("%s: %d pages, %d skippable, %d sorted; want %d, %d, %d", c.name, pages, skip, sorted, c.pages, c.skip, c.skipSorted)
		}
	}
}

// TestFirstEpochTargets: the first epoch is held to decode alone by wall
// time (the targets) and reported by CPU beside them (info), on v1 and
// v2 data.
func TestFirstEpochTargets(t *testing.T) {
	r := &PipelineReport{InputRows: 1000}
	r.DecodeOnly.Seconds, r.DecodeOnly.CPUSeconds = 1, 1.8
	r.Pipeline = PipelineRun{Seconds: 1, InRowsPS: 3000}
	r.FirstEpoch = PipelineRun{Seconds: 1.25, InRowsPS: 800, CPUSeconds: 2}
	r.V2 = &PipelineVariant{FirstEpoch: PipelineRun{Seconds: 1, InRowsPS: 1100, CPUSeconds: 1.5}}
	r.V2.DecodeOnly.Seconds, r.V2.DecodeOnly.CPUSeconds = 1, 1.5
	r.evaluate()
	want := map[string]struct {
		v         float64
		met, info bool
	}{
		"  the same, first epoch (no cached unit)":              {0.8, false, false},
		"  the same, first epoch, v2 pages with the page index": {1.1, true, false},
		"  first epoch by CPU: decode alone CPU / producer CPU": {0.9, false, true},
		"  the same by CPU, v2 pages with the page index":       {1.0, false, true},
	}
	seen := 0
	for _, tg := range r.Targets {
		w, ok := want[tg.Name]
		if !ok {
			continue
		}
		seen++
		if d := tg.Value - w.v; d > 1e-9 || d < -1e-9 || tg.Info != w.info || (!w.info && tg.Met != w.met) {
			t.Errorf("%q: %+v, want value %v, met %v, info %v", tg.Name, tg, w.v, w.met, w.info)
		}
	}
	if seen != len(want) {
		t.Errorf("%d of the %d first-epoch figures reported: %+v", seen, len(want), r.Targets)
	}
}
