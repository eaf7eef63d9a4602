package engine

import (
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/ops"
)

// slicedPlan is a plan of one file whose one row group of 131072 rows,
// with an id column and a list column of 50 int64 values a row, is cut
// into units of unitRows rows. Every unit's chunks carry the whole row
// group's value counts, as Parquet metadata does.
func slicedPlan(unitRows int64) *decode.Plan {
	const groupRows, perRow = 131072, 50
	p := &decode.Plan{Fields: []decode.Field{
		{Name: "id", Kind: column.Fixed, DType: column.Int64},
		{Name: "seq", Kind: column.List, DType: column.Int64},
	}}
	chunks := []decode.Chunk{{Values: groupRows}, {Values: groupRows * perRow}}
	for lo := int64(0); lo < groupRows; lo += unitRows {
		p.Units = append(p.Units, decode.Unit{File: "f.parquet", RowStart: lo, Rows: unitRows, Chunks: chunks})
	}
	return p
}

// TestSlotSizeOfSlicedRowGroups: a ring's slot is sized from values per
// row of the row group, however finely its units are cut. Dividing a
// chunk's value count by one unit's rows made the example pipeline's
// rings 1.1 GiB each (276 MiB slots for batches of about 2 MiB).
func TestSlotSizeOfSlicedRowGroups(t *testing.T) {
	const rows = 2048
	fields := packFields(planFields(slicedPlan(131072)), nil)
	// id exactly; seq at twice its 50 values a row, plus slack and offsets.
	want := int64(64) + rows*8 + 64 + 256 + (2*50*rows+4096)*8 + (rows+1)*8 + 2*(64+256)
	for _, unitRows := range []int64{131072, 16384, 1024} {
		if got := slotSize(slicedPlan(unitRows), fields, rows); got != want {
			t.Errorf("units of %d rows: slot size %d, want %d", unitRows, got, want)
		}
	}
}

// TestJaggedSlotSize: a jagged group's scalar keys take exactly Width ids
// a row; list keys take the statistics of the input column of their name,
// or else the widest input list.
func TestJaggedSlotSize(t *testing.T) {
	const rows = 1000
	p := slicedPlan(16384)
	perRow, widest := listRowStats(p)
	if perRow["seq"] != 50 || widest != 400 {
		t.Fatalf("listRowStats: seq %v values a row, widest %v bytes a row; want 50 and 400", perRow["seq"], widest)
	}
	offsets := func(keys int) int64 { return (2*int64(rows*keys)+1)*8 + 3*(64+256) }
	list := int64(2*50*rows+4096) * 8
	tests := []struct {
		name     string
		keys     []string
		parts    []OutField
		weighted bool
		want     int64
	}{
		{"scalars", []string{"a", "b"},
			[]OutField{{Kind: column.Fixed, Width: 1}, {Kind: column.Fixed, Width: 1}},
			false, 2*rows*8 + offsets(2)},
		{"a fixed vector", []string{"v"}, []OutField{{Kind: column.Fixed, Width: 4}}, false, 4*rows*8 + offsets(1)},
		{"a list by name", []string{"seq"}, []OutField{{Kind: column.List}}, false, list + offsets(1)},
		{"a derived list", []string{"history"}, []OutField{{Kind: column.List}}, false, list + offsets(1)},
		{"mixed", []string{"a", "history"},
			[]OutField{{Kind: column.Fixed, Width: 1}, {Kind: column.List}},
			false, rows*8 + list + offsets(2)},
		{"weighted", []string{"seq"}, []OutField{{Kind: column.List}}, true, list + list/2 + offsets(1) + 64 + 256},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := jaggedSlotSize(perRow, widest, tt.keys, tt.parts, rows, tt.weighted); got != tt.want {
				t.Errorf("got %d bytes, want %d", got, tt.want)
			}
		})
	}
	// Through packFields: the members' fields reach the sizing.
	g := []ops.Group{{Name: "sparse", Kind: "jagged", DType: column.Int64, Keys: []string{"a", "b"}}}
	out := []OutField{
		{Name: "sparse/a", Kind: column.Fixed, DType: column.Int64, Width: 1, Group: 1},
		{Name: "sparse/b", Kind: column.Fixed, DType: column.Int64, Width: 1, Group: 1},
	}
	pf := packFields(out, g)
	if got, want := slotSize(p, pf, rows), 64+2*rows*8+offsets(2); got != int64(want) {
		t.Errorf("a group of two scalar keys: slot size %d, want %d", got, want)
	}
}
