package column_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/lastmile/lastmile/column"
)

// batch builds a batch of n rows: a fixed int64 column (value = row), a
// fixed float32 pair column, a list column (row i has i%5 values i*10+k) and
// a nullable bytes column.
func batch(n, base int) *column.Batch {
	ids := column.Column{Name: "id", Kind: column.Fixed, DType: column.Int64, Width: 1, Len: n}
	pair := column.Column{Name: "pair", Kind: column.Fixed, DType: column.Float32, Width: 2, Len: n}
	list := column.Column{Name: "list", Kind: column.List, DType: column.Int64, Len: n, Offsets: []int64{0}}
	str := column.Column{Name: "s", Kind: column.Bytes, DType: column.Uint8, Len: n, Offsets: []int64{0}, Valid: make([]byte, n)}
	for i := 0; i < n; i++ {
		r := base + i
		ids.Data = binary.LittleEndian.AppendUint64(ids.Data, uint64(r))
		pair.Data = binary.LittleEndian.AppendUint32(pair.Data, uint32(r))
		pair.Data = binary.LittleEndian.AppendUint32(pair.Data, uint32(r+1))
		for k := 0; k < r%5; k++ {
			list.Data = binary.LittleEndian.AppendUint64(list.Data, uint64(r*10+k))
		}
		list.Offsets = append(list.Offsets, int64(len(list.Data)/8))
		if r%3 != 0 {
			str.Valid[i] = 1
			str.Data = append(str.Data, []byte("row")[:r%4]...)
		}
		str.Offsets = append(str.Offsets, int64(len(str.Data)))
	}
	return &column.Batch{Rows: n, Columns: []column.Column{ids, pair, list, str}}
}

func equalRows(t *testing.T, got *column.Batch, want *column.Batch) {
	t.Helper()
	if err := got.Check(); err != nil {
		t.Fatal(err)
	}
	if got.Rows != want.Rows {
		t.Fatalf("%d rows, want %d", got.Rows, want.Rows)
	}
	for i := range want.Columns {
		g, w := &got.Columns[i], &want.Columns[i]
		if string(g.Data) != string(w.Data) || len(g.Offsets) != len(w.Offsets) || string(g.Valid) != string(w.Valid) {
			t.Fatalf("column %s differs", w.Name)
		}
		for j := range w.Offsets {
			if g.Offsets[j] != w.Offsets[j] {
				t.Fatalf("column %s offsets differ at %d", w.Name, j)
			}
		}
	}
}

func TestAppendRows(t *testing.T) {
	src := batch(50, 0)
	var dst column.Batch
	dst.AppendRows(src, 0, 7)
	dst.AppendRows(src, 7, 30)
	dst.AppendRows(src, 30, 50)
	equalRows(t, &dst, src)
	dst.Reset()
	dst.AppendRows(src, 10, 20)
	equalRows(t, &dst, batch(10, 10))
	// Rows without columns (a pipeline that selects none) add up too
	// (FuzzPipeline found a carry of them reset at every append).
	none := &column.Batch{Rows: 200}
	var cat column.Batch
	cat.AppendRows(none, 0, 77)
	cat.AppendRows(none, 77, 200)
	if cat.Rows != 200 || len(cat.Columns) != 0 {
		t.Errorf("rows without columns: %d rows, %d columns; want 200, 0", cat.Rows, len(cat.Columns))
	}
}

func TestGather(t *testing.T) {
	src := batch(64, 0)
	idx := rand.New(rand.NewPCG(1, 2)).Perm(64)
	sel := make([]int32, len(idx))
	for i, v := range idx {
		sel[i] = int32(v)
	}
	var g column.Batch
	g.Gather(src, sel)
	// Gathering back with the inverse permutation restores the source.
	inv := make([]int32, len(sel))
	for i, v := range sel {
		inv[v] = int32(i)
	}
	var back column.Batch
	back.Gather(&g, inv)
	equalRows(t, &back, src)
	// A contiguous selection equals AppendRows of that range.
	var part column.Batch
	part.Gather(src, []int32{5, 6, 7, 8})
	equalRows(t, &part, batch(4, 5))
}

func TestCheckCatchesBrokenColumns(t *testing.T) {
	b := batch(4, 0)
	b.Columns[2].Offsets[3] = 0
	if err := b.Check(); err == nil {
		t.Error("decreasing offsets not caught")
	}
	b = batch(4, 0)
	b.Columns[0].Data = b.Columns[0].Data[:8]
	if err := b.Check(); err == nil {
		t.Error("short data not caught")
	}
}
