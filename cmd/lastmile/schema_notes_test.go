package main

import (
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/parquet-go/parquet-go/format"
)

// TestChangedInAddedAndPromoted: a column added after some files were written
// and promoted after others: the note says both, not only the promotion.
func TestChangedInAddedAndPromoted(t *testing.T) {
	plan := &decode.Plan{
		Files:  []decode.FileInfo{{Path: "a"}, {Path: "b"}, {Path: "c"}},
		Fields: []decode.Field{{Name: "n", Kind: column.Fixed, DType: column.Int64, Nullable: true, Path: []string{"n"}, Physical: int32(format.Int64)}},
		Units: []decode.Unit{
			{File: "a", Chunks: []decode.Chunk{{Leaf: -1, Absent: true}}},                 // written before n was added
			{File: "b", Chunks: []decode.Chunk{{Leaf: 1, Physical: int32(format.Int32)}}}, // before n became a long
			{File: "c", Chunks: []decode.Chunk{{Leaf: 1}}},
		},
	}
	note := changedIn(plan)[0]
	if !strings.Contains(note, "added since 1 of 3") || !strings.Contains(note, "INT32 in 1 of 3") {
		t.Errorf("note %q, want it to say both: added since 1 of 3 files, and stored as INT32 in 1 of 3", note)
	}
}
