package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/iceberg/icebergtest"
	"github.com/lastmile/lastmile/spec"
)

// An input and a side table, both Iceberg tables partitioned by
// bucket[8](key), join bucket by bucket: the rows are those of the
// whole-table join, within a max_memory that the whole table exceeds.
func TestIcebergBucketJoin(t *testing.T) {
	dir := t.TempDir()
	tabs := map[string]*icebergtest.Table{}
	write := func(name string, l icebergtest.Layout, rows []icebergtest.Row) string {
		tab, err := icebergtest.New(filepath.Join(dir, name), l)
		if err != nil {
			t.Fatal(err)
		}
		_, meta, err := tab.Append(rows)
		if err != nil {
			t.Fatal(err)
		}
		tabs[name] = tab
		return meta
	}
	var in, side []icebergtest.Row
	for id := range int64(3000) {
		in = append(in, icebergtest.Row{ID: id, Part: "x", Key: id % 1000})
	}
	for k := int64(0); k < 1000; k += 3 {
		side = append(side, icebergtest.Row{ID: k, Part: "y", Key: k, Score: float64(k)})
	}
	input := write("in", icebergtest.Layout{Buckets: 8}, in)
	bucketed := write("side", icebergtest.Layout{Buckets: 8}, side)
	whole := write("side_whole", icebergtest.Layout{}, side)

	on := "key"
	run := func(table, maxMem string) ([]int64, error) {
		src := fmt.Sprintf(`inputs: [%q]
batch: {size: 10, last: keep}
ring: {dir: RINGDIR, name: t, slots: 3}
decode: {workers: 3}
pipeline:
  - join: {kind: semi, table: %q, on: %s, max_memory: %s}
  - rename: {id: row_id}
  - select: [row_id]
`, "iceberg:"+input, "iceberg:"+table, on, maxMem)
		_, res, err := runJob(t, src)
		if err != nil {
			return nil, err
		}
		return allRows(t, res), nil
	}
	want, err := run(whole, "1GiB")
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 3*334 { // keys 0, 3, ..., 999 in each of the three id ranges
		t.Fatalf("whole-table join kept %d rows, want %d", len(want), 3*334)
	}
	for _, id := range want {
		if (id%1000)%3 != 0 {
			t.Fatalf("whole-table join kept id %d", id)
		}
	}
	// Checked before it starts (as lastmiled does), the bucket join fits.
	job, err := spec.Parse("j.yaml", []byte(fmt.Sprintf("inputs: [%q]\nbatch: {size: 10}\npipeline:\n  - join: {kind: semi, table: %q, on: key, max_memory: 6KiB}\n",
		"iceberg:"+input, "iceberg:"+bucketed)))
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.Check(context.Background(), job, nil, nil); err != nil {
		t.Errorf("Check of the bucket join: %v", err)
	}
	got, err := run(bucketed, "6KiB")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("bucket join kept %d rows, whole-table join %d", len(got), len(want))
	}
	// The whole table does not fit 6KiB: the fallback refuses it clearly.
	if _, err := run(whole, "6KiB"); err == nil || !strings.Contains(err.Error(), "over max_memory") {
		t.Errorf("whole table over max_memory: %v", err)
	}
	// The key renamed in all three tables after their files were written:
	// both joins read it by field id under its new name.
	metas := map[string]*string{"in": &input, "side": &bucketed, "side_whole": &whole}
	for name, meta := range metas {
		if *meta, err = tabs[name].Rename("key", "user_key"); err != nil {
			t.Fatal(err)
		}
	}
	on = "user_key"
	for _, tc := range []struct{ table, maxMem string }{{whole, "1GiB"}, {bucketed, "6KiB"}} {
		got, err := run(tc.table, tc.maxMem)
		if err != nil {
			t.Fatalf("renamed key, %s: %v", tc.maxMem, err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("renamed key, %s: kept %d rows, want %d", tc.maxMem, len(got), len(want))
		}
	}
}
