package ops

import (
	"math"
	"testing"
)

func TestIntTable(t *testing.T) {
	keys := []int64{0, -1, 1, math.MinInt64, math.MaxInt64, 1 << 40, 16, 32, 48}
	for _, rows := range []bool{false, true} {
		var tab intTable
		tab.init(len(keys), rows)
		for i, k := range keys {
			if prev := tab.insert(k, int32(i)); prev != -1 {
				t.Fatalf("insert %d: already there (%d)", k, prev)
			}
		}
		for i, k := range keys {
			got := tab.find(k)
			if want := int32(i); !rows {
				want = 0
				if got != want {
					t.Errorf("find %d = %d, want a hit", k, got)
				}
			} else if got != want {
				t.Errorf("find %d = %d, want %d", k, got, want)
			}
			if prev := tab.insert(k, 99); rows && prev != int32(i) || prev < 0 {
				t.Errorf("insert %d again: %d", k, prev)
			}
		}
		for _, k := range []int64{2, -2, math.MinInt64 + 1, 64} {
			if got := tab.find(k); got != -1 {
				t.Errorf("find %d = %d, want -1", k, got)
			}
		}
	}
}
