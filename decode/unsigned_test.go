package decode

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
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
	if u32At(1) <= math.MaxInt32 {
		t.Fatal("the test's values do not reach past 2^31")
	}
	checkUnsigned(t, func(i int) u32Row {
		v := u32At(i)
		r := u32Row{Dict: u32At(i % 37), Plain: v, Delta: v / 3}
		if i%3 != 0 {
			r.Opt = &v
		}
		return r
	}, func(i int) []int64 {
		return []int64{int64(u32At(i % 37)), int64(u32At(i)), int64(u32At(i) / 3), int64(u32At(i))}
	})
}

// checkUnsigned writes 3,000 rows made by row, in v1 and v2 pages, and
// checks every unit's four int64 columns against want (the fourth, an
// optional one, is null, read as 0, in every third row).
func checkUnsigned[R any](t *testing.T, row func(i int) R, want func(i int) []int64) {
	t.Helper()
	for _, version := range []int{1, 2} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			rows := make([]R, 3000)
			for i := range rows {
				rows[i] = row(i)
			}
			p := filepath.Join(t.TempDir(), "u.parquet")
			writePG(t, p, rows, "snappy", version)
			plan := planPaths(t, PlanOptions{}, p)
			n := eachUnit(t, plan, func(_ Unit, b *column.Batch, first int) {
				for r := range b.Rows {
					i := first + r
					w := want(i)
					if i%3 == 0 {
						w[3] = 0
					}
					for c := range w {
						if got := b.Columns[c].Int64s()[r]; got != w[c] {
							t.Fatalf("row %d %s: %d, want %d", i, plan.Fields[c].Name, got, w[c])
						}
					}
				}
			})
			if n != len(rows) {
				t.Fatalf("%d rows, want %d", n, len(rows))
			}
		})
	}
}

// u64Row holds unsigned 64-bit integers (pyarrow writes numpy's uint64
// so), as hashed or sequential ids are often stored.
type u64Row struct {
	Dict  uint64  `parquet:"dict,dict"`
	Plain uint64  `parquet:"plain"`
	Delta uint64  `parquet:"delta,delta"`
	Opt   *uint64 `parquet:"opt,optional"`
}

// TestUnsigned64 reads UINT_64 as int64 where every value fits, and
// refuses a value past the largest int64 with an error naming the
// column and the value, rather than reading it as a negative one.
func TestUnsigned64(t *testing.T) {
	at := func(i int) uint64 { return uint64(i)*0x9E3779B97F4A7C15>>1 + uint64(i) } // below 2^63
	checkUnsigned(t, func(i int) u64Row {
		v := at(i)
		r := u64Row{Dict: at(i % 37), Plain: v, Delta: v / 3}
		if i%3 != 0 {
			r.Opt = &v
		}
		return r
	}, func(i int) []int64 { return []int64{int64(at(i % 37)), int64(at(i)), int64(at(i) / 3), int64(at(i))} })
	for _, col := range []string{"plain", "dict", "delta"} {
		t.Run("past 2^63 "+col, func(t *testing.T) {
			rows := make([]u64Row, 100)
			for i := range rows {
				rows[i] = u64Row{Dict: at(i % 5), Plain: at(i), Delta: at(i)}
			}
			big := uint64(1)<<63 + 12345
			switch col {
			case "plain":
				rows[70].Plain = big
			case "dict":
				rows[70].Dict = big
			case "delta":
				rows[70].Delta = big
			}
			p := filepath.Join(t.TempDir(), "big.parquet")
			writePG(t, p, rows, "snappy", 1)
			plan := planPaths(t, PlanOptions{Columns: []string{col}}, p)
			var b column.Batch
			err := plan.NewDecoder().Decode(context.Background(), plan.Units[0], &b)
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), fmt.Sprint(big)) || !strings.Contains(err.Error(), `"`+col+`"`) {
				t.Fatalf("a value past 2^63: %v; want ErrUnsupported naming the column and %d", err, big)
			}
		})
	}
}
