package decode

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"
)

type pageRow struct {
	ID  int64   `parquet:"id"`
	Opt *int64  `parquet:"opt,optional"`
	F   float64 `parquet:"f"`
	S   string  `parquet:"s"`
}

// TestPageBounds: the pages of a column by its ColumnIndex cover the
// unit's rows in order, bound every value they hold, and count the
// nulls of an optional column (a page of nulls only has no bounds);
// sliced units get the pages of their rows only.
func TestPageBounds(t *testing.T) {
	rows := make([]pageRow, 6000)
	for i := range rows {
		rows[i] = pageRow{ID: int64(i * 3), F: float64(i) / 4, S: string(rune('a' + i/1000))}
		if i < 2000 || i >= 4000 {
			v := int64(-i)
			rows[i].Opt = &v
		}
	}
	path := filepath.Join(t.TempDir(), "p.parquet")
	if err := parquet.WriteFile(path, rows, parquet.MaxRowsPerRowGroup(6000), parquet.PageBufferSize(2048)); err != nil {
		t.Fatal(err)
	}
	for _, maxRows := range []int64{0, 1500} {
		plan := planPaths(t, PlanOptions{MaxUnitRows: maxRows}, path)
		d := NewDecoder(plan.Fields)
		for _, u := range plan.Units {
			if err := d.Open(context.Background(), u); err != nil {
				t.Fatal(err)
			}
			for fi, f := range plan.Fields {
				pages, err := d.PageBounds(fi)
				if err != nil {
					t.Fatal(err)
				}
				if len(pages) < 2 {
					t.Fatalf("%s: %d pages with bounds, want several", f.Name, len(pages))
				}
				next := int64(0)
				for _, pg := range pages {
					if pg.First != next || pg.End <= pg.First || pg.Rows < pg.End-pg.First {
						t.Fatalf("%s unit at %d: page [%d, %d) of %d rows after row %d", f.Name, u.RowStart, pg.First, pg.End, pg.Rows, next)
					}
					next = pg.End
					for r := pg.First; r < pg.End; r++ {
						checkPageRow(t, f.Name, &pg, rows[u.RowStart+r])
					}
				}
				if next != u.Rows {
					t.Fatalf("%s: pages end at row %d of %d", f.Name, next, u.Rows)
				}
			}
		}
		d.Close()
	}
}

func checkPageRow(t *testing.T, col string, pg *PageBounds, r pageRow) {
	t.Helper()
	var ok bool
	switch col {
	case "id":
		ok = pg.Known && pg.Int && pg.MinInt <= r.ID && r.ID <= pg.MaxInt && pg.Nulls == 0
	case "opt":
		if r.Opt == nil {
			ok = pg.Nulls > 0
		} else {
			ok = pg.Known && pg.MinInt <= *r.Opt && *r.Opt <= pg.MaxInt && pg.Nulls < pg.Rows
		}
		if !pg.Known {
			ok = ok && pg.Nulls == pg.Rows
		}
	case "f":
		ok = pg.Known && pg.Float && pg.MinFloat <= r.F && r.F <= pg.MaxFloat
	case "s":
		ok = pg.Known && pg.MinString <= r.S && r.S <= pg.MaxString
	}
	if !ok {
		t.Fatalf("%s: row %+v outside its page's bounds %+v", col, r, *pg)
	}
}

// TestPageIndexPrefetched: the fields named to PrefetchPageIndex have
// their OffsetIndex and ColumnIndex asked for at Open, and PageBounds
// reads nothing that was not.
func TestPageIndexPrefetched(t *testing.T) {
	pfs := &askFS{}
	forIndexedFiles(t, pfs, func(t *testing.T, plan *Plan) {
		d := plan.NewDecoder()
		defer d.Close()
		d.PrefetchPageIndex([]int{0, 1})
		for _, u := range plan.Units {
			pfs.takeAsked()
			pfs.take()
			if err := d.Open(context.Background(), u); err != nil {
				t.Fatal(err)
			}
			asked := union(pfs.takeAsked())
			withBounds := 0
			for fi := range 2 {
				c := &u.Chunks[fi]
				if c.ColIndexLen == 0 {
					continue
				}
				want := []span{{c.Index, c.Index + int64(c.IndexLen)}, {c.ColIndex, c.ColIndex + int64(c.ColIndexLen)}}
				if got := dictsIn(want, asked); len(got) != 2 {
					t.Fatalf("field %d: Open asked for %v, not its indexes %v", fi, asked, want)
				}
				pages, err := d.PageBounds(fi)
				if err != nil {
					t.Fatal(err)
				}
				withBounds += len(pages)
			}
			if withBounds == 0 {
				t.Fatal("no page bounds: the files have no ColumnIndex")
			}
			reads := pfs.take()
			if in := dictsIn(reads, asked); len(in) != len(reads) {
				t.Fatalf("PageBounds read %v, of which only %v was prefetched", reads, in)
			}
		}
	})
}
