package peer

import (
	"math/rand/v2"
	"testing"

	"github.com/lastmile/lastmile/column"
)

// randomBatch makes a batch with every kind and dtype, nulls in some
// columns, and rows of rows.
func randomBatch(r *rand.Rand, rows int, bigLists bool) *column.Batch {
	b := &column.Batch{Rows: rows}
	add := func(name string, kind column.Kind, dt column.DType, width int, nullable bool) {
		c := column.Column{Name: name, Kind: kind, DType: dt, Width: width, Len: rows}
		size := dt.Size()
		switch kind {
		case column.Fixed:
			c.Data = make([]byte, rows*width*size)
		default:
			c.Offsets = make([]int64, rows+1)
			for i := 1; i <= rows; i++ {
				n := r.IntN(8)
				if bigLists {
					n = r.IntN(4000)
				}
				c.Offsets[i] = c.Offsets[i-1] + int64(n)
			}
			c.Data = make([]byte, int(c.Offsets[rows])*size)
		}
		for i := range c.Data {
			c.Data[i] = byte(r.Uint32())
		}
		if nullable {
			c.Valid = make([]byte, rows)
			for i := range c.Valid {
				c.Valid[i] = byte(r.IntN(2))
			}
		}
		if kind == column.Fixed && width == 1 {
			c.Width = 1
		}
		b.Columns = append(b.Columns, c)
	}
	for i, dt := range []column.DType{column.Bool, column.Uint8, column.Int8, column.Int16, column.Int32, column.Int64, column.Float16, column.BFloat16, column.Float32, column.Float64} {
		add("f"+dt.String(), column.Fixed, dt, 1, i%3 == 0)
	}
	add("wide", column.Fixed, column.Float32, 7, false)
	add("seq", column.List, column.Int64, 0, true)
	add("seq32", column.List, column.Int32, 0, false)
	add("text", column.Bytes, column.Uint8, 0, true)
	return b
}

func TestWireRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	out := &column.Batch{} // reused across cases, as a worker's buffer is
	for _, c := range []struct {
		name    string
		rows    int
		big     bool
		minRecs int
	}{
		{"empty", 0, false, 1},
		{"one row", 1, false, 1},
		{"thousand rows", 1000, false, 1},
		{"split into several records", 600, true, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := randomBatch(r, c.rows, c.big)
			_, _, n := sendThrough(t, b, false, out)
			if n < c.minRecs {
				t.Errorf("%d records, want at least %d", n, c.minRecs)
			}
			sameBatch(t, out, b)
		})
	}
}

func nilIfEmpty(v []int64) []int64 {
	if len(v) == 0 {
		return nil
	}
	return v
}

func TestChecksumSeesEveryByte(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	b := randomBatch(r, 50, false)
	sum := Checksum(b)
	for i := range b.Columns {
		c := &b.Columns[i]
		for _, buf := range [][]byte{c.Data, c.Valid, int64Bytes(c.Offsets)} {
			if len(buf) == 0 {
				continue
			}
			j := r.IntN(len(buf))
			buf[j] ^= 0x10
			if Checksum(b) == sum {
				t.Fatalf("column %s: a flipped bit leaves the checksum", c.Name)
			}
			buf[j] ^= 0x10
		}
	}
}
