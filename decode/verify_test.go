package decode

import (
	"context"
	"errors"
	"testing"
)

// TestVerifyUnits: a verifying decoder opens the units a plan made,
// whole row groups and slices of them, and refuses a unit whose figures
// are not its file's.
func TestVerifyUnits(t *testing.T) {
	plan, dir := generatedPlan(t, 30000, 10000, 1000)
	ctx := context.Background()
	sliced, err := PlanFiles(ctx, []string{dir}, PlanOptions{MaxUnitRows: 2500})
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(plan.Fields)
	defer d.Close()
	d.VerifyUnits()
	for _, u := range append(append([]Unit(nil), plan.Units...), sliced.Units...) {
		if err := d.Open(ctx, u); err != nil {
			t.Fatalf("unit rows [%d, %d) of row group %d: %v", u.RowStart, u.RowStart+u.Rows, u.RowGroup, err)
		}
	}
	for _, tc := range []struct {
		name string
		mod  func(u *Unit)
	}{
		{"more values", func(u *Unit) { u.Chunks[0].Values *= 1000 }},
		{"more uncompressed bytes", func(u *Unit) { u.Chunks[1].Uncompressed++ }},
		{"another leaf", func(u *Unit) { u.Chunks[0].Leaf, u.Chunks[1].Leaf = u.Chunks[1].Leaf, u.Chunks[0].Leaf }},
		{"another codec", func(u *Unit) { u.Chunks[0].Codec = 0 }},
		{"pages past the chunk", func(u *Unit) { u.Chunks[0].End++ }},
		{"pages before the chunk", func(u *Unit) { u.Chunks[1].Offset = u.Chunks[0].Offset }},
		{"no such row group", func(u *Unit) { u.RowGroup = 99 }},
		{"rows past the row group", func(u *Unit) { u.Rows++ }},
		{"rows further in", func(u *Unit) { u.RowStart = 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := plan.Units[1]
			u.Chunks = append([]Chunk(nil), u.Chunks...)
			tc.mod(&u)
			if err := d.Open(ctx, u); !errors.Is(err, ErrBadUnit) {
				t.Errorf("Open: %v, want ErrBadUnit", err)
			}
		})
	}
}
