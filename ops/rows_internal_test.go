package ops

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/column"
)

// TestCompactGather checks compactColumn and gatherColumn against row by
// row copies, on every kind of column and random selections.
func TestCompactGather(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 200 {
		rows := rng.IntN(50)
		cols := []column.Column{
			{Name: "i64", Kind: column.Fixed, DType: column.Int64, Width: 1},
			{Name: "i32", Kind: column.Fixed, DType: column.Int32, Width: 1},
			{Name: "i16x3", Kind: column.Fixed, DType: column.Int16, Width: 3},
			{Name: "list", Kind: column.List, DType: column.Int64, Width: 1, Offsets: []int64{0}},
			{Name: "str", Kind: column.Bytes, DType: column.Uint8, Width: 1, Offsets: []int64{0}},
		}
		var want [][][]byte // per column, per row: the row's bytes
		for ci := range cols {
			c := &cols[ci]
			var rs [][]byte
			for range rows {
				var r []byte
				switch c.Kind {
				case column.Fixed:
					r = make([]byte, c.DType.Size()*c.Width)
					for k := range r {
						r[k] = byte(rng.IntN(256))
					}
				default:
					for range rng.IntN(4) {
						if c.DType == column.Int64 {
							r = binary.LittleEndian.AppendUint64(r, rng.Uint64())
						} else {
							r = append(r, byte('a'+rng.IntN(26)))
						}
					}
					c.Offsets = append(c.Offsets, c.Offsets[len(c.Offsets)-1]+int64(len(r)/c.DType.Size()))
				}
				c.Data = append(c.Data, r...)
				rs = append(rs, r)
			}
			c.Len = rows
			if iter%2 == 0 {
				c.Valid = make([]byte, rows)
				for k := range c.Valid {
					c.Valid[k] = byte(rng.IntN(2))
				}
			}
			want = append(want, rs)
		}
		var sel []int32
		for r := range rows {
			if rng.IntN(3) > 0 {
				sel = append(sel, int32(r))
			}
		}
		for ci := range cols {
			src := &cols[ci]
			check := func(how string, c *column.Column) {
				t.Helper()
				if err := c.Check(); err != nil || c.Len != len(sel) {
					t.Fatalf("%s %s: %v, %d rows", how, src.Name, err, c.Len)
				}
				for j, r := range sel {
					var got []byte
					if c.Kind == column.Fixed {
						w := c.DType.Size() * c.Width
						got = c.Data[j*w : (j+1)*w]
					} else {
						got = c.Row(j)
					}
					if !slices.Equal(got, want[ci][r]) || src.Valid != nil && c.Valid[j] != src.Valid[r] {
						t.Fatalf("%s %s: row %d (was %d) differs", how, src.Name, j, r)
					}
				}
			}
			var g column.Column
			gatherColumn(&g, src, sel)
			check("gather", &g)
			cp := *src
			cp.Data, cp.Offsets, cp.Valid = slices.Clone(src.Data), slices.Clone(src.Offsets), slices.Clone(src.Valid)
			compactColumn(&cp, sel)
			check("compact", &cp)
		}
	}
}
