package engine_test

import (
	"testing"
)

// With decode.max_unit_rows splitting every row group, no unit is decoded
// whole (decode.Unit.Whole), so the decoder would never take arena memory
// (reserveWhole): no arena is made, and no unit is counted as in it.
func TestArenaNotMadeForSplitUnits(t *testing.T) {
	src := `
inputs: [DATA]
batch: {size: 100}
epochs: 1
decode: {workers: 2, max_unit_rows: 500}
ring: {dir: RINGDIR, name: a, slots: 3, arena: true}
`
	st, got := runDigested(t, src)
	if st.ArenaUnits > 0 && got[0].inArena == 0 {
		t.Errorf("Stats.ArenaUnits = %d units \"decoded into the arena\", but no tensor of %d batches lies in it", st.ArenaUnits, len(got[0].batches))
	}
}
