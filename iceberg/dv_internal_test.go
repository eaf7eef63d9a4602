package iceberg

import (
	"slices"
	"testing"

	"github.com/apache/iceberg-go/table/dv"
)

// FuzzDeletionVector: any blob gives positions, each below the file's
// rows and as many as the entry says, or an error; never a panic.
func FuzzDeletionVector(f *testing.F) {
	for _, pos := range [][]int64{{0}, {3, 9, 70000, 1 << 33}, {}} {
		bm := dv.NewRoaringPositionBitmap()
		for _, p := range pos {
			bm.Set(uint64(p))
		}
		blob, err := dv.SerializeDV(bm)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(blob, int64(len(pos)), int64(1)<<34)
		f.Add(blob, int64(-1), int64(1)<<34) // a count below 0 checks nothing in DeserializeDV
	}
	f.Fuzz(func(t *testing.T, blob []byte, count, rows int64) {
		got, err := vectorPositions(nil, blob, count, rows)
		if err != nil {
			return
		}
		if int64(len(got)) != count || !slices.IsSorted(got) {
			t.Fatalf("%d positions (want %d), sorted %v", len(got), count, slices.IsSorted(got))
		}
		for _, p := range got {
			if p < 0 || p >= rows {
				t.Fatalf("position %d of a file of %d rows", p, rows)
			}
		}
	})
}
