package decode

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/lastmile/lastmile/column"
)

// u32Row holds unsigned 32-bit integers (pyarrow writes numpy's uint32
// so) in a dictionary, PLAIN, DELTA_BINARY_PACKED and nullable.
type u32Row struct {
	Dict  uint32  `parquet:"dict,dict"`
	Plain uint32  `parquet:"plain"`
	Delta uint32  `parquet:"delta,delta"`
	Opt   *uint32 `parquet:"opt,optional"`
}

func u32At(i int) uint32 { return uint32(i*2654435761) | uint32(i%2)<<31 }

// TestUnsigned32 widens UINT_32 to int64, values past 2^31 included.
func TestUnsigned32(t *testing.T) {
	for _, version := range []int{1, 2} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			rows := make([]u32Row, 3000)
			for i := range rows {
				v := u32At(i)
				rows[i] = u32Row{Dict: u32At(i % 37), Plain: v, Delta: v / 3}
				if i%3 != 0 {
					rows[i].Opt = &v
				}
			}
			p := filepath.Join(t.TempDir(), "u.parquet")
			writePG(t, p, rows, "snappy", version)
			plan := planPaths(t, PlanOptions{}, p)
			big := 0
			row := eachUnit(t, plan, func(_ Unit, b *column.Batch, first int) {
				for r := range b.Rows {
					i := first + r
					want := []int64{int64(u32At(i % 37)), int64(u32At(i)), int64(u32At(i) / 3), int64(u32At(i))}
					if i%3 == 0 {
						want[3] = 0
					}
					for c, w := range want {
						if got := b.Columns[c].Int64s()[r]; got != w {
							t.Fatalf("row %d %s: %d, want %d", i, plan.Fields[c].Name, got, w)
						}
					}
					if want[1] > math.MaxInt32 {
						big++
					}
				}
			})
			if row != 3000 || big == 0 {
				t.Fatalf("%d rows, %d past 2^31", row, big)
			}
		})
	}
}
