package peer

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/lastmile/lastmile/column"
)

// TestCompileWithoutColumnsPlansTheUnitsFile: a ticket without the
// requester's columns (a requester before them sends none) is compiled
// against its unit's file, planned by its name as the requester planned
// it: a file "part[0].parquet" is that file, not the glob
// "part0.parquet", which matched nothing, and the peer refused the unit.
func TestCompileWithoutColumnsPlansTheUnitsFile(t *testing.T) {
	c := newCompileFixture(t, t.TempDir())
	up, err := compile(c.ticket(nil, 0), c.fs, 1)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	units := up.Units() // as the requester plans them, with the columns the pipeline reads
	up.Close()
	root, _ := c.fs.r.Dir("data")
	if err := os.Rename(filepath.Join(root, "part-00000.parquet"), filepath.Join(root, "part[0].parquet")); err != nil {
		t.Fatal(err)
	}
	c.units = units
	for i := range c.units {
		c.units[i].File = "data/part[0].parquet"
	}
	if up, err = compile(c.ticket(nil, 0), c.fs, 1); err != nil {
		t.Fatalf("compile: %v", err)
	}
	defer up.Close()
	var out column.Batch
	if err := up.Compute(context.Background(), c.units[0], &out); err != nil || out.Rows == 0 {
		t.Fatalf("unit 0: %d rows, %v", out.Rows, err)
	}
}
