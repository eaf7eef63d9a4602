package decode

import (
	"cmp"
	"context"
	"runtime"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/datagen"
)

// TestUnitColumnGrowsOnce: a unit decoded into a fresh batch (as each
// batch of a job's first epoch is) sizes each column of many pages once
// from the rows seen so far, rather than growing it a page at a time
// with a copy each time (growData). Grown by 1.25x steps, the bytes
// allocated for the batch's columns come to about five times what they
// hold; sized once, to a little over it.
func TestUnitColumnGrowsOnce(t *testing.T) {
	ctx := context.Background()
	plan, _ := generatedPlan(t, 60000, 60000, 2000)
	if len(plan.Units) != 1 {
		t.Fatalf("%d units, want 1", len(plan.Units))
	}
	d := NewDecoder(plan.Fields)
	defer d.Close()
	var warm column.Batch
	if err := d.Decode(ctx, plan.Units[0], &warm); err != nil { // the decoder's own buffers
		t.Fatal(err)
	}
	var fresh column.Batch
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := d.Decode(ctx, plan.Units[0], &fresh); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	held := 0
	for _, c := range fresh.Columns {
		held += len(c.Data) + 8*len(c.Offsets) + len(c.Valid)
	}
	alloc := int(after.TotalAlloc - before.TotalAlloc)
	t.Logf("decoded %d bytes into a fresh batch; %d allocated (%.2fx)", held, alloc, float64(alloc)/float64(held))
	if alloc > 2*held {
		t.Errorf("%d bytes allocated to decode %d: columns grown page by page", alloc, held)
	}
}

// TestGrowData: how growData sizes a column that must grow.
func TestGrowData(t *testing.T) {
	for _, tc := range []struct {
		name           string
		have, n, rows  int // bytes held, bytes the page adds, rows after it
		want, wantMax  int
		stored         int64 // storedBound of the chunk; 0: unbounded
		minCap, maxCap int
		scratch        bool
	}{
		{name: "sized for the unit at the rate so far", have: 0, n: 8000, rows: 1000, want: 100000, wantMax: 1 << 30,
			minCap: 800000, maxCap: 900000},
		{name: "a dense first page: capped by what the chunk's values can take", have: 0, n: 800000, rows: 100, want: 100000, wantMax: 2000000,
			minCap: 2000000, maxCap: 2000000},
		{name: "a chunk claiming more than its stored bytes hold: capped by them", have: 0, n: 8000, rows: 1000, want: 1 << 31, wantMax: 1 << 34, stored: 200000,
			minCap: 200000, maxCap: 200000},
		{name: "past the stored bytes' bound: 1.25x steps", have: 300000, n: 8000, rows: 1000, want: 1 << 31, wantMax: 1 << 34, stored: 200000,
			minCap: 308000, maxCap: 308000 + 308000/4},
		{name: "the last page: no estimate", have: 8000, n: 8, rows: 1001, want: 1000, wantMax: 1 << 30,
			minCap: 8008, maxCap: 8008 + 8008/4 + 64},
		{name: "no chunk size known: 1.25x steps", have: 0, n: 8000, rows: 1000, want: 100000, wantMax: 0,
			minCap: 8000, maxCap: 10000},
		{name: "the scratch column: 1.25x steps", have: 0, n: 8000, rows: 1000, want: 100000, wantMax: 1 << 30, scratch: true,
			minCap: 8000, maxCap: 10000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Decoder{want: tc.want, wantMax: tc.wantMax, wantStored: tc.stored}
			if tc.stored == 0 {
				d.wantStored = 1 << 40
			}
			col := &column.Column{Data: make([]byte, tc.have)}
			if tc.scratch {
				col = &d.scratch
				col.Data = make([]byte, tc.have)
			}
			got := d.growData(col, tc.n, tc.rows)
			if len(got) != tc.have+tc.n || cap(got) < tc.minCap || cap(got) > tc.maxCap {
				t.Errorf("len %d cap %d, want len %d, cap in [%d, %d]", len(got), cap(got), tc.have+tc.n, tc.minCap, tc.maxCap)
			}
		})
	}
}

// TestReservedForTheWholeChunk: a unit that is its row group whole has
// each column sized before its first page, from the chunk's level count,
// a thirty-second over; a buffer reused for a later unit up to that much
// larger is not reallocated. A unit cut from a row group is not sized
// that way (its share of the chunk's values is not known).
func TestReservedForTheWholeChunk(t *testing.T) {
	ctx := context.Background()
	plan, dir := generatedPlan(t, 60000, 20000, 2000)
	// The unit with the fewest list values first, then the largest that
	// is within a thirty-second of it.
	units := append([]Unit(nil), plan.Units...)
	slices.SortStableFunc(units, func(a, b Unit) int { return cmp.Compare(listValues(plan, a), listValues(plan, b)) })
	a, b := units[0], units[0]
	for _, u := range units[1:] {
		if fitsIn(plan, u, a) {
			b = u
		}
	}
	if listValues(plan, b) == listValues(plan, a) {
		t.Fatal("no unit a little larger than the smallest: change the generated data")
	}
	d := NewDecoder(plan.Fields)
	defer d.Close()
	var batch column.Batch
	if err := d.Decode(ctx, a, &batch); err != nil {
		t.Fatal(err)
	}
	if !d.whole {
		t.Fatal("a unit of a whole row group not taken as whole")
	}
	first := map[string]*byte{}
	for i, c := range batch.Columns {
		if c.Kind == column.Bytes {
			continue
		}
		want := int(a.Chunks[i].Values) * c.DType.Size()
		if cap(c.Data) != want+want/32 {
			t.Errorf("%s: cap %d for %d bytes, want %d", c.Name, cap(c.Data), len(c.Data), want+want/32)
		}
		first[c.Name] = &c.Data[:1][0]
	}
	if err := d.Decode(ctx, b, &batch); err != nil {
		t.Fatal(err)
	}
	for _, c := range batch.Columns {
		if p, ok := first[c.Name]; ok && p != &c.Data[:1][0] {
			t.Errorf("%s reallocated for a unit a little larger (cap %d, len %d)", c.Name, cap(c.Data), len(c.Data))
		}
	}

	sliced, err := PlanFiles(ctx, []string{dir}, PlanOptions{MaxUnitRows: 5000})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range sliced.Units[:2] {
		if err := d.Open(ctx, u); err != nil {
			t.Fatal(err)
		}
		if d.whole {
			t.Errorf("a unit of rows [%d, %d) of a row group taken as whole", u.RowStart, u.RowStart+u.Rows)
		}
	}
}

// listValues is the level count of u's list chunks.
func listValues(plan *Plan, u Unit) int64 {
	var n int64
	for i, f := range plan.Fields {
		if f.Kind == column.List {
			n += u.Chunks[i].Values
		}
	}
	return n
}

// fitsIn reports whether every chunk of u has at most a thirty-second
// more values than a's.
func fitsIn(plan *Plan, u, a Unit) bool {
	for i := range plan.Fields {
		if v := a.Chunks[i].Values; u.Chunks[i].Values > v+v/32 {
			return false
		}
	}
	return true
}

// TestReserveTrustsTheStoredBytes: a unit whose chunk claims far more
// values than its stored bytes can hold (a hostile or corrupt plan sent
// to a peer) does not make the decoder reserve for the claim: the chunk
// grows from what its pages hold.
func TestReserveTrustsTheStoredBytes(t *testing.T) {
	ctx := context.Background()
	plan, _ := generatedPlan(t, 20000, 20000, 2000)
	u := plan.Units[0]
	u.Chunks = append([]Chunk(nil), u.Chunks...)
	li := -1
	for i, f := range plan.Fields {
		if f.Kind == column.List {
			li = i
			break
		}
	}
	if li < 0 {
		t.Fatal("no list field in the generated data")
	}
	c := &u.Chunks[li]
	c.Values = 1 << 40
	d := NewDecoder(plan.Fields)
	defer d.Close()
	if err := d.Open(ctx, u); err != nil {
		t.Fatal(err)
	}
	var col column.Column
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := d.DecodeColumn(li, nil, &col)
	runtime.ReadMemStats(&after)
	stored := c.End - c.Offset + c.DictLen
	if alloc := int64(after.TotalAlloc - before.TotalAlloc); alloc > 3*maxExpansion*stored {
		t.Errorf("%d bytes allocated for a chunk of %d stored bytes (err %v)", alloc, stored, err)
	}
}

// generatedPlan writes rows of `lastmile gen` data in row groups and
// pages of the given rows into a temporary directory and plans it: every
// kind of column `lastmile gen` writes, with 4 of its 32 dense ones (what
// these tests check holds column by column; the other 28 cost `make test`
// about 3 s under the race detector).
func generatedPlan(t *testing.T, rows, groupRows, pageRows int64) (*Plan, string) {
	t.Helper()
	cfg := datagen.DefaultConfig()
	cfg.Dense = 4
	cfg.Rows, cfg.RowGroupRows, cfg.PageRows = rows, groupRows, int(pageRows)
	dir := t.TempDir()
	if _, err := datagen.Write(context.Background(), dir, cfg); err != nil {
		t.Fatal(err)
	}
	plan, err := PlanFiles(context.Background(), []string{dir}, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return plan, dir
}
