package engine_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/lastmile/lastmile/iceberg/icebergtest"
)

// icebergSideTable writes an input table (ids 0..99, key id%10) and a side
// table holding one row per key 0..9, and returns both tables' metadata
// files and the side table.
func icebergSideTable(t *testing.T) (input string, side *icebergtest.Table) {
	t.Helper()
	dir := t.TempDir()
	in, err := icebergtest.New(filepath.Join(dir, "in"), icebergtest.Layout{})
	if err != nil {
		t.Fatal(err)
	}
	var rows []icebergtest.Row
	for id := range int64(100) {
		rows = append(rows, icebergtest.Row{ID: id, Part: "x", Key: id % 10})
	}
	if _, input, err = in.Append(rows); err != nil {
		t.Fatal(err)
	}
	side, err = icebergtest.New(filepath.Join(dir, "side"), icebergtest.Layout{})
	if err != nil {
		t.Fatal(err)
	}
	var srows []icebergtest.Row
	for k := range int64(10) {
		srows = append(srows, icebergtest.Row{ID: 1000 + k, Part: "y", Key: k, Score: float64(k)})
	}
	if _, _, err := side.Append(srows); err != nil {
		t.Fatal(err)
	}
	return input, side
}

func semiJoinIDs(t *testing.T, input, side string) []int64 {
	t.Helper()
	src := fmt.Sprintf(`inputs: [%q]
batch: {size: 10, last: keep}
ring: {dir: RINGDIR, name: t, slots: 3}
pipeline:
  - join: {kind: semi, table: %q, on: key}
  - rename: {id: row_id}
  - select: [row_id]
`, "iceberg:"+input, "iceberg:"+side)
	_, res, err := runJob(t, src)
	if err != nil {
		t.Fatal(err)
	}
	return allRows(t, res)
}

// SideTablePositionDeletes: a side table's row that the side
// table's snapshot deletes (a position delete) must not match: the rows
// keyed 3 have no live side row, so a semi join keeps 90 of 100 rows.
func TestSideTablePositionDeletes(t *testing.T) {
	input, side := icebergSideTable(t)
	p, ok := side.Locate(1003) // the side row of key 3
	if !ok {
		t.Fatal("side row not written")
	}
	_, meta, err := side.DeletePositions([]icebergtest.Position{p}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := semiJoinIDs(t, input, meta)
	for _, id := range got {
		if id%10 == 3 {
			t.Fatalf("semi join kept %d rows, among them id %d (key 3), whose side row the side table's snapshot deletes; want 90 rows", len(got), id)
		}
	}
}

// SideTableEqualityDeletes: the same with an equality delete
// of key 3 in the side table.
func TestSideTableEqualityDeletes(t *testing.T) {
	input, side := icebergSideTable(t)
	_, meta, err := side.DeleteEquality("y", "key", []int64{3}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := semiJoinIDs(t, input, meta)
	for _, id := range got {
		if id%10 == 3 {
			t.Fatalf("semi join kept %d rows, among them id %d (key 3), whose side row the side table's snapshot deletes; want 90 rows", len(got), id)
		}
	}
}

// IdentityPartitionColumnNotInFiles: a table that Iceberg's
// migrate (or add_files) made of a Hive table partitioned by a column
// keeps the Hive files, which do not hold that column: its values are
// the directory names, which the table keeps as its identity partition
// values. Iceberg's readers give such a column its file's partition value
// in every row (Java: PartitionUtil.constantsMap, used by the Parquet
// readers for identity partition fields whether or not the file holds
// the column). lastmile reads it as a column added since the file was
// written: null in every row, so a filter on it keeps nothing (or a
// select gives nulls).
func TestIdentityPartitionColumnNotInFiles(t *testing.T) {
	tab, rows := importedTable(t, 100, letters)
	meta := migrateAsHive(t, tab, rows) // the partition column in the directory names only
	src := fmt.Sprintf(`inputs: [%q]
batch: {size: 10, last: keep}
ring: {dir: RINGDIR, name: t, slots: 3}
pipeline:
  - filter: {expr: 'part == "a"'}
  - rename: {id: row_id}
  - select: [row_id]
`, "iceberg:"+meta)
	_, res, err := runJob(t, src)
	if err != nil {
		t.Fatal(err)
	}
	got := allRows(t, res)
	if len(got) != 25 {
		t.Fatalf("filter part == \"a\" over a migrated Hive table partitioned by part kept %d rows; want 25 (ids 0, 4, ..., 96: the file of partition a)", len(got))
	}
}
