package decode

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

// TestUnitDeletedTravels: a unit's deleted rows survive the trip to a
// peer, and rows out of order, repeated or outside the unit are refused.
func TestUnitDeletedTravels(t *testing.T) {
	u := Unit{File: "t/x.parquet", FileSize: 100, Rows: 10, Deleted: []int32{0, 3, 9}}
	b, err := u.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back Unit
	if err := back.UnmarshalBinary(b); err != nil || !slices.Equal(back.Deleted, u.Deleted) {
		t.Fatalf("round trip: %v, %v", back.Deleted, err)
	}
	for _, bad := range [][]int32{{3, 0}, {3, 3}, {-1}, {10}} {
		u.Deleted = bad
		j, _ := json.Marshal(u)
		if err := back.UnmarshalBinary(append([]byte{unitVersion}, j...)); err == nil {
			t.Errorf("a unit of 10 rows with deleted rows %v accepted", bad)
		}
	}
}

// TestUnitAbsentChunkTravels: a chunk of a column the file lacks
// (Chunk.Absent) survives the trip to a peer, and one that would read
// bytes, or a chunk with no leaf that is not absent, is refused.
func TestUnitAbsentChunkTravels(t *testing.T) {
	present := Chunk{Leaf: 0, Offset: 4, End: 50, Values: 10, Uncompressed: 80}
	absent := Chunk{Leaf: -1, Absent: true, Values: 10, Default: []byte{7, 0, 0, 0}}
	u := Unit{File: "t/x.parquet", FileSize: 100, Rows: 10, Chunks: []Chunk{present, absent}}
	b, err := u.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back Unit
	if err := back.UnmarshalBinary(b); err != nil || !reflect.DeepEqual(back.Chunks, u.Chunks) {
		t.Fatalf("round trip: %+v, %v", back.Chunks, err)
	}
	for _, bad := range []Chunk{
		{Leaf: -1, Absent: true, Values: 10, Offset: 4, End: 50},
		{Leaf: 0, Absent: true, Values: 10},
		{Leaf: -1, Absent: true, Values: 10, DictOffset: 4, DictLen: 8},
		{Leaf: -1, Absent: true, Values: 10, Index: 60, IndexLen: 8},
		{Leaf: -1, Absent: true, Values: -1},
		{Leaf: -1, Absent: true, Values: 10, Default: make([]byte, maxDefault+1)},
		{Leaf: 0, Offset: 4, End: 50, Values: 10, Default: []byte{1}},
		{Leaf: -1, Offset: 4, End: 50, Values: 10},
	} {
		u.Chunks[1] = bad
		j, _ := json.Marshal(u)
		if err := back.UnmarshalBinary(append([]byte{unitVersion}, j...)); err == nil {
			t.Errorf("chunk %+v accepted", bad)
		}
	}
}
