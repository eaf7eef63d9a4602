package column_test

import (
	"math/rand/v2"
	"testing"

	"github.com/lastmile/lastmile/column"
)

// GatherFrom over several sources equals Gather over their concatenation,
// whatever the sources' sizes and whichever of them carry validity bytes.
func TestGatherFrom(t *testing.T) {
	noNulls := func(b *column.Batch) *column.Batch { b.Columns[3].Valid = nil; return b }
	cases := []struct {
		name string
		srcs []*column.Batch
	}{
		{"one source", []*column.Batch{batch(40, 0)}},
		{"three sources", []*column.Batch{batch(10, 0), batch(25, 10), batch(7, 35)}},
		{"an empty source", []*column.Batch{batch(12, 0), batch(0, 12), batch(9, 12)}},
		{"validity in some sources", []*column.Batch{noNulls(batch(8, 0)), batch(8, 8), noNulls(batch(8, 16))}},
		{"validity in none", []*column.Batch{noNulls(batch(8, 0)), noNulls(batch(8, 8))}},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var all column.Batch
			var from, idx []int32
			for s, b := range tc.srcs {
				all.AppendRows(b, 0, b.Rows)
				for r := range b.Rows {
					from, idx = append(from, int32(s)), append(idx, int32(r))
				}
			}
			perm := rng.Perm(len(idx))
			pf, pi, sel := make([]int32, len(perm)), make([]int32, len(perm)), make([]int32, len(perm))
			for j, p := range perm {
				pf[j], pi[j], sel[j] = from[p], idx[p], int32(p)
			}
			var want, got column.Batch
			want.Gather(&all, sel)
			got.GatherFrom(tc.srcs, pf, pi)
			if want.Columns[3].Valid == nil && got.Columns[3].Valid != nil {
				// All valid either way; Gather keeps a source's nil.
				for _, v := range got.Columns[3].Valid {
					if v != 1 {
						t.Fatal("a row of sources without nulls came out null")
					}
				}
				got.Columns[3].Valid = nil
			}
			equalRows(t, &got, &want)
			// Reusing the batch's buffers gives the same rows.
			got.GatherFrom(tc.srcs, pf, pi)
			if want.Columns[3].Valid == nil {
				got.Columns[3].Valid = nil
			}
			equalRows(t, &got, &want)
		})
	}
}
