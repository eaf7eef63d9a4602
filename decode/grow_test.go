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
