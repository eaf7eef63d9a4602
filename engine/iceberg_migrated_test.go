package engine_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ice "github.com/apache/iceberg-go"
	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/iceberg/icebergtest"
	"github.com/parquet-go/parquet-go"
)

// importedTable appends n rows (id, part(id), key id%10, score id) to a
// new table partitioned by part and imported as Iceberg's migrate makes
// them (no field ids in its files); it returns the table and its rows.
func importedTable(t *testing.T, n int64, part func(id int64) string) (*icebergtest.Table, []icebergtest.Row) {
	t.Helper()
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "events"), icebergtest.Layout{ByPart: true, Imported: true})
	if err != nil {
		t.Fatal(err)
	}
	var rows []icebergtest.Row
	for id := range n {
		rows = append(rows, icebergtest.Row{ID: id, Part: part(id), Key: id % 10, Score: float64(id)})
	}
	if _, _, err := tab.Append(rows); err != nil {
		t.Fatal(err)
	}
	return tab, rows
}

// letters is part a, b, c, d by id mod 4.
func letters(id int64) string { return string(rune('a' + id%4)) }

// migrateAsHive rewrites tab's data files as Hive's (no part column, no
// field ids) and writes a metadata file whose part column is optional,
// as Iceberg's migrate leaves it; it returns that metadata file.
func migrateAsHive(t *testing.T, tab *icebergtest.Table, rows []icebergtest.Row) string {
	t.Helper()
	type hiveRow struct {
		ID    int64   `parquet:"id"`
		Key   int64   `parquet:"key"`
		Score float64 `parquet:"score"`
	}
	byFile := map[string][]hiveRow{}
	for _, r := range rows {
		p, _ := tab.Locate(r.ID)
		byFile[p.File] = append(byFile[p.File], hiveRow{r.ID, r.Key, r.Score})
	}
	for loc, rs := range byFile {
		if err := parquet.WriteFile(strings.TrimPrefix(loc, "file://"), rs); err != nil {
			t.Fatal(err)
		}
	}
	text, err := os.ReadFile(tab.MetadataPath())
	if err != nil {
		t.Fatal(err)
	}
	var m iceberg.Metadata
	if err := json.Unmarshal(text, &m); err != nil {
		t.Fatal(err)
	}
	fields := m.Schemas[0].Fields()
	fields[1].Required = false
	m.Schemas[0] = ice.NewSchema(0, fields...)
	out, err := json.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	meta := filepath.Join(tab.Dir, "metadata", "migrated.metadata.json")
	if err := os.WriteFile(meta, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return meta
}

// TestEqualityDeleteOnMigratedPartitionColumn: a migrated Hive
// table (its files lack the identity partition column part) with an
// equality delete on part (Flink's upserts put the partition columns in
// the equality fields). The job reads part as each file's partition
// value (Scan.SchemaOf), but the equality deletes are matched against
// the files read with the table's schema alone (matchFile), where part
// is null: the rows of partition "a" that the snapshot deletes come
// back.
func TestEqualityDeleteOnMigratedPartitionColumn(t *testing.T) {
	tab, rows := importedTable(t, 100, letters)
	if _, _, err := tab.DeleteEquality("a", "part", []string{"a"}, 0); err != nil {
		t.Fatal(err)
	}
	meta := migrateAsHive(t, tab, rows)
	src := fmt.Sprintf(`inputs: [%q]
batch: {size: 10, last: keep}
ring: {dir: RINGDIR, name: t, slots: 3}
pipeline:
  - rename: {id: row_id}
  - select: [row_id]
`, "iceberg:"+meta)
	_, res, err := runJob(t, src)
	if err != nil {
		t.Fatal(err)
	}
	got := allRows(t, res)
	slices.Sort(got)
	var back []int64
	for _, id := range got {
		if id%4 == 0 {
			back = append(back, id)
		}
	}
	if len(got) != 75 || len(back) > 0 {
		t.Fatalf("read %d rows, %d of them of partition \"a\" (e.g. %v), which the snapshot's equality delete on part = \"a\" removes; want 75, none of partition a",
			len(got), len(back), back[:min(len(back), 5)])
	}
}

// TestLongPartitionValueLargeRowGroup: a migrated Hive table
// whose file (one row group of 1.1M rows) lacks its string identity
// partition column, of a 250-byte value. The partition value becomes an
// absent chunk's default, and the decoder's check of a peer's default
// (defaultFits: at most 2^28 bytes over the chunk's Values, the whole
// row group's rows, not the unit's) refuses every unit of it as a bad
// unit, even sliced by max_unit_rows: the table cannot be read at all.
// Java reads it (a constant per file).
func TestLongPartitionValueLargeRowGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1.1M rows")
	}
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "events"), icebergtest.Layout{ByPart: true, Imported: true})
	if err != nil {
		t.Fatal(err)
	}
	part := strings.Repeat("p", 250)
	rows := []icebergtest.Row{{ID: 0, Part: part}}
	if _, _, err := tab.Append(rows); err != nil {
		t.Fatal(err)
	}
	meta := migrateAsHive(t, tab, rows)
	// The Hive file: 1.1M rows in one row group.
	type hiveRow struct {
		ID    int64   `parquet:"id"`
		Key   int64   `parquet:"key"`
		Score float64 `parquet:"score"`
	}
	const n = 1_100_000
	hive := make([]hiveRow, n)
	for i := range hive {
		hive[i] = hiveRow{ID: int64(i)}
	}
	p, _ := tab.Locate(0)
	if err := parquet.WriteFile(strings.TrimPrefix(p.File, "file://"), hive, parquet.MaxRowsPerRowGroup(n)); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`inputs: [%q]
batch: {size: 65536, last: keep}
ring: {dir: RINGDIR, name: t, slots: 3}
decode: {max_unit_rows: 65536}
pipeline:
  - filter: {expr: 'part != "x"'}
  - rename: {id: row_id}
  - select: [row_id]
`, "iceberg:"+meta)
	_, res, err := runJob(t, src)
	if err != nil {
		t.Fatalf("a migrated table whose 1.1M-row row group lacks its 250-byte partition value: %v", err)
	}
	if got := allRows(t, res); len(got) != n {
		t.Fatalf("read %d rows, want %d", len(got), n)
	}
}

// TestMigratedPartitionColumnSelected: a migrated Hive table
// partitioned by day (values such as "2026-11-01", 10 bytes), the job
// selecting the partition column in batches of 1024 rows. The files lack
// the column: its chunks are absent, of no bytes, so the ring's slot is
// sized for 4 KiB of it (listRowStats: Uncompressed 0), and each batch
// holds 10 KiB of it.
func TestMigratedPartitionColumnSelected(t *testing.T) {
	tab, rows := importedTable(t, 4096, func(id int64) string { return fmt.Sprintf("2026-11-%02d", 1+id%2) })
	meta := migrateAsHive(t, tab, rows)
	src := fmt.Sprintf(`inputs: [%q]
batch: {size: 1024, last: keep}
ring: {dir: RINGDIR, name: t, slots: 3}
pipeline:
  - rename: {id: row_id}
  - select: [row_id, part]
`, "iceberg:"+meta)
	_, res, err := runJob(t, src)
	if err != nil {
		t.Fatalf("selecting a migrated table's partition column: %v", err)
	}
	if got := allRows(t, res); len(got) != len(rows) {
		t.Fatalf("read %d rows, want %d", len(got), len(rows))
	}
}
