package decode

import (
	"fmt"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/format"
)

// wideTable is a table of n columns c0..c(n-1): doubles, with every
// fourth a list of longs.
func wideTable(n int) *TableSchema {
	t := &TableSchema{IDs: map[string]int32{}, Stored: map[int32][]format.SchemaElement{}}
	for i := range n {
		name, id := fmt.Sprintf("c%d", i), int32(i+1)
		t.IDs[name] = id
		if i%4 == 3 {
			t.Stored[id] = optionalLongList(name, id)
		} else {
			t.Stored[id] = optionalDouble(name, id)
		}
	}
	return t
}

// BenchmarkTableField: resolving a table's 300 columns as the table
// stores them, which planning does for every column of every file
// (promote), uncached and from a planning run's cache.
func BenchmarkTableField(b *testing.B) {
	t := wideTable(300)
	names := make([]string, 300)
	for i := range names {
		names[i] = fmt.Sprintf("c%d", i)
	}
	for _, bc := range []struct {
		name  string
		cache *tableFields
	}{{"uncached", nil}, {"cached", &tableFields{}}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, n := range names {
					if _, ok := bc.cache.get(t, n, 0); !ok {
						b.Fatal("not found")
					}
				}
			}
		})
	}
}

// TestTableFieldsCache: the cache gives what tableField does, per table
// and per hash, and nothing for a table's missing column.
func TestTableFieldsCache(t *testing.T) {
	a, b := wideTable(8), wideTable(4)
	b.Stored[1] = optionalLongList("c0", 1) // c0 a list in b only
	c := &tableFields{}
	for range 2 {
		for _, tab := range []*TableSchema{a, b} {
			for _, name := range []string{"c0", "c3", "c7", "nope"} {
				for _, hash := range []uint64{0, 1000} {
					want, wok := tab.tableField(name, hash)
					got, ok := c.get(tab, name, hash)
					if ok != wok || got.Kind != want.Kind || got.DType != want.DType || got.Hash != want.Hash {
						t.Fatalf("%s hash %d: %+v %v, want %+v %v", name, hash, got, ok, want, wok)
					}
				}
			}
		}
	}
	if f, _ := c.get(b, "c0", 0); f.Kind != column.List {
		t.Fatalf("b's c0: %v, want a list", f.Kind)
	}
}
