package decode

import (
	"path/filepath"
	"testing"
)

type boundsRow struct {
	I64   int64   `parquet:"i64"`
	I32   int32   `parquet:"i32"`
	Day   int32   `parquet:"day,date"`
	S     string  `parquet:"s"`
	F     float64 `parquet:"f"`
	Opt   *int64  `parquet:"opt,optional"`
	List  []int64 `parquet:"list,list"`
	Price int64   `parquet:"price,decimal(2:18)"`
	U32   uint32  `parquet:"u32"`
	B     bool    `parquet:"b"`
	Bytes []byte  `parquet:"bytes"`
}

// TestBounds: a unit carries its row group's statistics where they bound
// the values as decoded, and nothing where they might not.
func TestBounds(t *testing.T) {
	rows := make([]boundsRow, 3000)
	for i := range rows {
		v := int64(i*7 - 5000)
		rows[i] = boundsRow{I64: v, I32: int32(-i), Day: int32(20000 + i/100), S: string(rune('a' + i%26)), F: float64(i),
			List: []int64{v}, Price: v, U32: uint32(i) << 20, B: i%2 == 0, Bytes: []byte{byte(i)}}
		if i%3 != 0 {
			rows[i].Opt = &v
		}
	}
	p := filepath.Join(t.TempDir(), "b.parquet")
	writePG(t, p, rows, "snappy", 1)
	for _, maxRows := range []int64{0, 700} {
		plan := planPaths(t, PlanOptions{MaxUnitRows: maxRows}, p)
		for _, u := range plan.Units {
			g := int(u.RowGroup) * 2000
			lo, hi := g, min(g+2000, len(rows))-1
			opt := Bounds{Known: true, Int: true, MinInt: 1 << 62, MaxInt: -1 << 62, Nulls: -1}
			for _, r := range rows[lo : hi+1] {
				if r.Opt != nil {
					opt.MinInt, opt.MaxInt = min(opt.MinInt, *r.Opt), max(opt.MaxInt, *r.Opt)
				}
			}
			want := map[string]Bounds{
				"i64":   {Known: true, Int: true, MinInt: rows[lo].I64, MaxInt: rows[hi].I64},
				"i32":   {Known: true, Int: true, MinInt: int64(rows[hi].I32), MaxInt: int64(rows[lo].I32)},
				"day":   {Known: true, Int: true, MinInt: int64(rows[lo].Day), MaxInt: int64(rows[hi].Day)},
				"s":     {Known: true, MinString: "a", MaxString: "z"},
				"f":     {Known: true, Float: true, MinFloat: rows[lo].F, MaxFloat: rows[hi].F},
				"opt":   opt,
				"list":  {},
				"price": {},
				"u32":   {},
				"b":     {},
				"bytes": {Known: true, MinString: "\x00", MaxString: "\xff"},
			}
			for i, f := range plan.Fields {
				w := want[f.Name]
				if f.Name != "opt" {
					w.Nulls = 0
				}
				if got := u.Bounds[i]; got != w {
					t.Fatalf("max rows %d, unit %d, %s: %+v, want %+v", maxRows, u.Seq, f.Name, got, w)
				}
			}
		}
	}
}
