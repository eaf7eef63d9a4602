package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/iceberg/icebergtest"
	"github.com/lastmile/lastmile/spec"
)

// TestPlanDigestSeesDeleteCommit: the hosts of a world compare
// PlanDigest (docs/python.md, "Several hosts") so that hosts that pinned
// different snapshots of a table (a commit landed between two hosts'
// submissions) refuse to start rather than deal different rows. A
// delete-only commit (Spark's merge-on-read DELETE: a position delete
// file, the data files unchanged) leaves every unit's file, size, row
// group and rows as they were, so the two snapshots' digests were equal:
// the host that pinned the snapshot before the DELETE hands its trainers
// the deleted rows, and nothing says so.
func TestPlanDigestSeesDeleteCommit(t *testing.T) {
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "events"), icebergtest.Layout{ByPart: true, RowGroupRows: 100})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]icebergtest.Row, 400)
	for i := range rows {
		id := int64(i)
		rows[i] = icebergtest.Row{ID: id, Part: string(rune('a' + id%4)), Key: id % 10, Score: float64(id)}
	}
	before, _, err := tab.Append(rows)
	if err != nil {
		t.Fatal(err)
	}
	var pos []icebergtest.Position
	for id := int64(0); id < 40; id++ {
		p, ok := tab.Locate(id)
		if !ok {
			t.Fatalf("id %d not written", id)
		}
		pos = append(pos, p)
	}
	after, meta, err := tab.DeletePositions(pos, 0)
	if err != nil {
		t.Fatal(err)
	}
	digest := func(snap int64) string {
		t.Helper()
		text := fmt.Sprintf("inputs: [\"iceberg:%s?snapshot=%d\"]\ncolumns: [id]\nbatch: {size: 10}\nworld_size: 2\nring: {dir: %s, name: d}\n", meta, snap, t.TempDir())
		job, err := spec.Parse("t.yaml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		fp, err := engine.EstimateFootprint(context.Background(), job, nil)
		if err != nil {
			t.Fatal(err)
		}
		return fp.PlanDigest
	}
	if a, b := digest(before), digest(after); a == b {
		t.Fatalf("snapshot %d (before the DELETE) and %d (40 rows deleted) have the same plan digest %s: hosts that pinned one each would start, and one would return the deleted rows", before, after, a)
	}
}
