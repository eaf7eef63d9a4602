package decode

import (
	"context"
	"runtime"
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
	cfg := datagen.DefaultConfig()
	cfg.Rows, cfg.RowGroupRows, cfg.PageRows = 60000, 60000, 2000
	dir := t.TempDir()
	if _, err := datagen.Write(ctx, dir, cfg); err != nil {
		t.Fatal(err)
	}
	plan, err := PlanFiles(ctx, []string{dir}, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
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
		minCap, maxCap int
		scratch        bool
	}{
		{name: "sized for the unit at the rate so far", have: 0, n: 8000, rows: 1000, want: 100000, wantMax: 1 << 30,
			minCap: 800000, maxCap: 900000},
		{name: "a dense first page: capped by what the chunk's values can take", have: 0, n: 800000, rows: 100, want: 100000, wantMax: 2000000,
			minCap: 2000000, maxCap: 2000000},
		{name: "the last page: no estimate", have: 8000, n: 8, rows: 1001, want: 1000, wantMax: 1 << 30,
			minCap: 8008, maxCap: 8008 + 8008/4 + 64},
		{name: "no chunk size known: 1.25x steps", have: 0, n: 8000, rows: 1000, want: 100000, wantMax: 0,
			minCap: 8000, maxCap: 10000},
		{name: "the scratch column: 1.25x steps", have: 0, n: 8000, rows: 1000, want: 100000, wantMax: 1 << 30, scratch: true,
			minCap: 8000, maxCap: 10000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Decoder{want: tc.want, wantMax: tc.wantMax}
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
