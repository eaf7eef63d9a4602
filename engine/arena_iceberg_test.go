package engine_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/iceberg/icebergtest"
)

// Arena against no arena, byte for byte, over Iceberg schema evolution
// (promoted, added and defaulted columns).
func TestArenaIceberg(t *testing.T) {
	tables := map[string]string{}
	{
		tab, err := icebergtest.New(filepath.Join(t.TempDir(), "ev"), icebergtest.Layout{ByPart: true, FloatScore: true})
		if err != nil {
			t.Fatal(err)
		}
		tab.Append(partRows(0, 1000, 4))
		tab.PromoteScore()
		_, meta, err := tab.Append(partRows(1000, 500, 4))
		if err != nil {
			t.Fatal(err)
		}
		tables["promoted"] = meta
	}
	tables["added"] = addedTable(t, icebergtest.Layout{ByPart: true})
	{
		tab, _, _, _ := icebergTableIn(t, icebergtest.Layout{ByPart: true, FormatVersion: 3})
		meta, err := tab.AddDefaulted()
		if err != nil {
			t.Fatal(err)
		}
		tables["defaulted"] = meta
	}
	for name, meta := range tables {
		for _, size := range []int{64, 500} {
			t.Run(fmt.Sprintf("%s/%d", name, size), func(t *testing.T) {
				src := fmt.Sprintf("inputs: [%q]\nbatch: {size: %d, last: pad}\nepochs: 2\nworld_size: 2\nring: {dir: RINGDIR, name: t, slots: 3ARENA}\n", "iceberg:"+meta, size)
				_, want := runDigested(t, strings.ReplaceAll(src, "ARENA", ""))
				st, got := runDigested(t, strings.ReplaceAll(src, "ARENA", ", arena: true"))
				for r := range want {
					if !slices.Equal(got[r].batches, want[r].batches) {
						t.Fatalf("rank %d: %d batches with the arena, %d without, differ", r, len(got[r].batches), len(want[r].batches))
					}
				}
				t.Logf("units %d fallbacks %d inArena %d", st.ArenaUnits, st.ArenaFallbacks, got[0].inArena)
			})
		}
	}
}
