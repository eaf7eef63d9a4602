package datagen_test

import (
	"os"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// eachChunk calls fn with every column chunk of the file at path: its row
// group's index and rows, its column's index, the chunk, and its offset
// index's pages.
func eachChunk(t *testing.T, path string, fn func(rg int, rows int64, c int, cc format.ColumnChunk, locs []format.PageLocation)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	ois := pf.OffsetIndexes()
	k := 0
	for rg, g := range pf.Metadata().RowGroups {
		for c, cc := range g.Columns {
			fn(rg, g.NumRows, c, cc, ois[k].PageLocations)
			k++
		}
	}
}

// TestWritesPageIndex: every column chunk of every file, with v1 and v2
// data pages, has a column index and an offset index, and the offset
// index's pages cover the row group from row 0 in increasing order. The
// decoder's selections skip unread pages by it (decode/pageindex.go).
func TestWritesPageIndex(t *testing.T) {
	for _, version := range []int{1, 2} {
		cfg := testConfig()
		cfg.DataPageVersion = version
		for _, path := range write(t, cfg) {
			eachChunk(t, path, func(rg int, rows int64, c int, cc format.ColumnChunk, locs []format.PageLocation) {
				if cc.OffsetIndexLength <= 0 || cc.ColumnIndexLength <= 0 {
					t.Fatalf("v%d %s row group %d column %d: no page index", version, path, rg, c)
				}
				if len(locs) == 0 || locs[0].FirstRowIndex != 0 {
					t.Fatalf("v%d row group %d column %d: offset index %v", version, rg, c, locs)
				}
				for i := 1; i < len(locs); i++ {
					if locs[i].FirstRowIndex <= locs[i-1].FirstRowIndex || locs[i].FirstRowIndex >= rows ||
						locs[i].Offset < locs[i-1].Offset+int64(locs[i-1].CompressedPageSize) {
						t.Fatalf("v%d row group %d column %d: page %d of the offset index out of order: %v", version, rg, c, i, locs)
					}
				}
			})
		}
	}
}

// TestPageRows: with PageRows, every column's pages start at every
// multiple of it within a row group and hold at most that many rows,
// scalar columns whose pages would otherwise hold the whole row group
// included; the size limit still closes pages between.
func TestPageRows(t *testing.T) {
	for _, version := range []int{1, 2} {
		cfg := testConfig()
		cfg.DataPageVersion, cfg.PageBytes, cfg.PageRows = version, 1<<20, 300
		for _, path := range write(t, cfg) {
			eachChunk(t, path, func(rg int, rows int64, c int, _ format.ColumnChunk, locs []format.PageLocation) {
				starts := map[int64]bool{}
				for i, l := range locs {
					starts[l.FirstRowIndex] = true
					end := rows
					if i+1 < len(locs) {
						end = locs[i+1].FirstRowIndex
					}
					if end-l.FirstRowIndex > int64(cfg.PageRows) {
						t.Fatalf("v%d row group %d column %d: page %d holds %d rows", version, rg, c, i, end-l.FirstRowIndex)
					}
				}
				for r := int64(0); r < rows; r += int64(cfg.PageRows) {
					if !starts[r] {
						t.Fatalf("v%d row group %d column %d: no page starts at row %d: %v", version, rg, c, r, locs)
					}
				}
			})
		}
	}
}
