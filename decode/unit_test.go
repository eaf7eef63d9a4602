package decode

import (
	"encoding/json"
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
