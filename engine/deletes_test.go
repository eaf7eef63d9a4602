package engine_test

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/iceberg/icebergtest"
	"github.com/lastmile/lastmile/objstore"
	"github.com/lastmile/lastmile/objstore/s3test"
)

// deletesTable writes ids 0..1999 in four files (by id mod 4) of
// 100-row groups, then deletes the rows of the ids del picks by their
// positions, and returns the table's metadata file.
func deletesTable(t *testing.T, del func(id int64) bool) string {
	t.Helper()
	_, meta := deletesTableEq(t, del)
	return meta
}

// deletesTableEq is deletesTable, returning the table too.
func deletesTableEq(t *testing.T, del func(id int64) bool) (*icebergtest.Table, string) {
	t.Helper()
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "events"), icebergtest.Layout{ByPart: true, RowGroupRows: 100})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]icebergtest.Row, 2000)
	for i := range rows {
		id := int64(i)
		rows[i] = icebergtest.Row{ID: id, Part: string(rune('a' + id%4)), Key: id % 10, Score: float64(id)}
	}
	if _, _, err := tab.Append(rows); err != nil {
		t.Fatal(err)
	}
	var pos []icebergtest.Position
	for id := int64(1999); id >= 0; id-- { // unsorted, as a delete file need not be
		if del(id) {
			p, ok := tab.Locate(id)
			if !ok {
				t.Fatalf("id %d not written", id)
			}
			pos = append(pos, p)
		}
	}
	_, meta, err := tab.DeletePositions(pos, 0)
	if err != nil {
		t.Fatal(err)
	}
	return tab, meta
}

// TestIcebergPositionDeletes: the rows an Iceberg snapshot's position
// deletes name never reach a trainer, with and without a pipeline, in
// units that cut row groups apart, and with the page index ruling out
// rows too.
func TestIcebergPositionDeletes(t *testing.T) {
	// Ids 0..3 (the first row of each file), every id whose tens digit
	// is 3 (runs of rows across row groups), all of 1600..1999 (whole row
	// groups) and id 1599 (a row group's last row).
	del := func(id int64) bool { return id < 4 || id/10%10 == 3 || id >= 1599 }
	meta := deletesTable(t, del)
	keep := func(f func(int64) bool) []int64 {
		var out []int64
		for id := range int64(2000) {
			if !del(id) && (f == nil || f(id)) {
				out = append(out, id)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name, body string
		want       []int64
	}{
		{"no pipeline", "columns: [id, key]\n", keep(nil)},
		{"no pipeline, units of 30 rows", "columns: [id, key]\ndecode: {max_unit_rows: 30}\n", keep(nil)},
		{"a filter", "pipeline:\n  - filter: {expr: 'key != 5'}\n  - select: [id]\n", keep(func(id int64) bool { return id%10 != 5 })},
		{"a filter the page index helps", "decode: {max_unit_rows: 100}\npipeline:\n  - filter: {expr: 'id >= 1000'}\n  - select: [id]\n",
			keep(func(id int64) bool { return id >= 1000 })},
		{"a map only", "pipeline:\n  - map: {k2: 'key * 2'}\n  - select: [id, k2]\n", keep(nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := fmt.Sprintf("inputs: [%q]\nbatch: {size: 64, last: keep}\nring: {dir: %q, name: t, slots: 4}\n%s", "iceberg:"+meta, dir, tc.body)
			st, out := runRowsStats(t, src, dir)
			var ids []int64
			for _, r := range out["id"] {
				ids = append(ids, r[0])
			}
			slices.Sort(ids)
			if !slices.Equal(ids, tc.want) {
				var miss []int64
				for _, id := range tc.want {
					if _, found := slices.BinarySearch(ids, id); !found {
						miss = append(miss, id)
					}
				}
				t.Fatalf("%d rows; want %d (first %v; missing %v)", len(ids), len(tc.want), ids[:min(8, len(ids))], miss[:min(40, len(miss))])
			}
			if st.Rows != int64(len(tc.want)) {
				t.Errorf("Stats.Rows %d; want %d", st.Rows, len(tc.want))
			}
			if deleted := 2000 - int64(len(keep(nil))); st.RowsDeleted != deleted {
				t.Errorf("Stats.RowsDeleted %d; want %d", st.RowsDeleted, deleted)
			}
			if k := out["k2"]; k != nil {
				for i, r := range k {
					if r[0] != 2*(out["id"][i][0]%10) {
						t.Fatalf("row %d: k2 %d for id %d", i, r[0], out["id"][i][0])
					}
				}
			}
		})
	}
}

// TestIcebergDeletesResume: with deletions the only rows dropped, resuming
// from per-rank cursors gives exactly the tail of the uninterrupted run,
// and every epoch holds each kept row once.
func TestIcebergDeletesResume(t *testing.T) {
	del := func(id int64) bool { return id%9 == 0 || (id >= 500 && id < 700) }
	meta := deletesTable(t, del)
	src := fmt.Sprintf(`inputs: [%q]
batch: {size: 50, last: drop}
world_size: 2
epochs: 2
seed: 7
shuffle: {units: true, buffer: 200}
pipeline:
  - rename: {id: row_id}
  - select: [row_id]
`, "iceberg:"+meta)
	full := runStreams(t, src, 2, nil)
	kept := 0
	for id := range int64(2000) {
		if !del(id) {
			kept++
		}
	}
	for _, rs := range full {
		seen := map[uint64]map[int64]bool{}
		for k, c := range rs.cursors {
			if seen[c.Epoch] == nil {
				seen[c.Epoch] = map[int64]bool{}
			}
			for _, id := range rs.rows[k] {
				if del(id) || seen[c.Epoch][id] {
					t.Fatalf("epoch %d: row %d deleted or seen twice", c.Epoch, id)
				}
				seen[c.Epoch][id] = true
			}
		}
	}
	if perRank := len(full[0].cursors) / 2; perRank != kept/2/50 {
		t.Fatalf("%d batches an epoch a rank; want %d of %d kept rows", perRank, kept/2/50, kept)
	}
	for _, cur := range [][]engine.Cursor{
		{{Epoch: 0, Batch: 3}, {Epoch: 0, Batch: 1}},
		{{Epoch: 1, Batch: 2}, {Epoch: 0, Batch: 15}},
	} {
		got := runStreams(t, src, 2, cur)
		for r := range full {
			if want := tailFrom(full[r], cur[r]); !reflect.DeepEqual(got[r], want) {
				t.Fatalf("resume %v: rank %d got %d batches, want the uninterrupted tail of %d", cur, r, len(got[r].cursors), len(want.cursors))
			}
		}
	}
}

// TestIcebergDeletesOnS3: a table on object storage (data, delete file
// and metadata all S3 objects, named by s3:// locations) loses the same
// rows as a local one.
func TestIcebergDeletesOnS3(t *testing.T) {
	srv := startS3(t)
	bucket, _ := srv.Bucket("lake")
	tab, err := icebergtest.New(filepath.Join(bucket, "events"), icebergtest.Layout{ByPart: true, RowGroupRows: 100, URL: "s3://lake/events"})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]icebergtest.Row, 600)
	for i := range rows {
		rows[i] = icebergtest.Row{ID: int64(i), Part: string(rune('a' + i%2)), Key: int64(i % 10)}
	}
	if _, _, err := tab.Append(rows); err != nil {
		t.Fatal(err)
	}
	del := func(id int64) bool { return id%5 == 0 || (id >= 200 && id < 420) }
	var pos []icebergtest.Position
	for id := range int64(600) {
		if del(id) {
			p, _ := tab.Locate(id)
			pos = append(pos, p)
		}
	}
	if _, _, err := tab.DeletePositions(pos, 0); err != nil {
		t.Fatal(err)
	}
	c, err := objstore.New(objstore.Config{Endpoint: srv.Endpoint, PathStyle: true, AccessKey: s3test.Access, SecretKey: s3test.Secret})
	if err != nil {
		t.Fatal(err)
	}
	src := `inputs: ["iceberg:s3://lake/events/metadata/v2.metadata.json"]
columns: [id]
batch: {size: 32, last: keep}
ring: {dir: RINGDIR, slots: 4}
`
	var ids []int64
	for _, b := range runTensors(t, src, objstore.Mount(nil, c.Source(nil)))[0] {
		for k := 0; k+8 <= len(b); k += 8 {
			ids = append(ids, int64(binary.LittleEndian.Uint64(b[k:])))
		}
	}
	slices.Sort(ids)
	var want []int64
	for id := range int64(600) {
		if !del(id) {
			want = append(want, id)
		}
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("%d rows over S3; want %d", len(ids), len(want))
	}
}

// TestIcebergEqualityDeletes: rows an equality delete matches, in its
// partition, never reach a trainer, beside the position deletes, with and
// without a pipeline, and the same when resumed.
func TestIcebergEqualityDeletes(t *testing.T) {
	byPos := func(id int64) bool { return id%7 == 0 }
	tab, _ := deletesTableEq(t, byPos)
	// Partition a (id%4 == 0): key 6 (ids 16, 36, ...). Partition b
	// (id%4 == 1): ids 1..1999 below 300 by id, and id 2 (partition c's,
	// not b's: untouched).
	// The key's delete file is written as an int column, as before ALTER
	// TABLE promoted key to long: read as long, it deletes as the long 6.
	if _, _, err := tab.DeleteEquality("a", "key", []int32{6}, 0); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for id := int64(1); id < 300; id += 4 {
		ids = append(ids, id)
	}
	_, meta, err := tab.DeleteEquality("b", "id", append(ids, 2), 0)
	if err != nil {
		t.Fatal(err)
	}
	del := func(id int64) bool {
		return byPos(id) || (id%4 == 0 && id%10 == 6) || (id%4 == 1 && id < 300)
	}
	var want []int64
	for id := range int64(2000) {
		if !del(id) {
			want = append(want, id)
		}
	}
	for _, body := range []string{
		"columns: [id, key]\ndecode: {max_unit_rows: 30}\n",
		"pipeline:\n  - filter: {expr: 'id >= 0'}\n  - select: [id]\n",
	} {
		dir := t.TempDir()
		src := fmt.Sprintf("inputs: [%q]\nbatch: {size: 64, last: keep}\nring: {dir: %q, name: t, slots: 4}\n%s", "iceberg:"+meta, dir, body)
		_, out := runRowsStats(t, src, dir)
		var got []int64
		for _, r := range out["id"] {
			got = append(got, r[0])
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%q: %d rows; want %d", body, len(got), len(want))
		}
	}
	// Renamed after the deletes were written: the data and delete files
	// still name it "key"; both are read by its field id.
	meta, err = tab.Rename("key", "bucket_key")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := fmt.Sprintf("inputs: [%q]\nbatch: {size: 64, last: keep}\nring: {dir: %q, name: t, slots: 4}\ncolumns: [id, bucket_key]\n", "iceberg:"+meta, dir)
	_, out := runRowsStats(t, src, dir)
	var got []int64
	for _, r := range out["id"] {
		got = append(got, r[0])
	}
	slices.Sort(got)
	if !slices.Equal(got, want) || len(out["bucket_key"]) != len(want) {
		t.Fatalf("renamed: %d rows, %d keys; want %d", len(got), len(out["bucket_key"]), len(want))
	}
}

// TestIcebergDeletionVectors: a format 3 table's deletion vectors drop
// their rows in a run, as position deletes do.
func TestIcebergDeletionVectors(t *testing.T) {
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "v3"), icebergtest.Layout{ByPart: true, RowGroupRows: 50, FormatVersion: 3})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]icebergtest.Row, 400)
	for i := range rows {
		rows[i] = icebergtest.Row{ID: int64(i), Part: string(rune('a' + i%2)), Key: int64(i % 10)}
	}
	if _, _, err := tab.Append(rows); err != nil {
		t.Fatal(err)
	}
	del := func(id int64) bool { return id%2 == 1 && (id < 120 || id%9 == 0) }
	var pos []int64
	for id := int64(1); id < 400; id += 2 {
		if del(id) {
			p, _ := tab.Locate(id)
			pos = append(pos, p.Pos)
		}
	}
	_, meta, err := tab.DeleteVector(tab.DataFiles()[1], pos, 0) // partition b: the odd ids
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := fmt.Sprintf("inputs: [%q]\nbatch: {size: 32, last: keep}\nring: {dir: %q, name: t, slots: 4}\ncolumns: [id]\ndecode: {max_unit_rows: 20}\n", "iceberg:"+meta, dir)
	_, out := runRowsStats(t, src, dir)
	var got, want []int64
	for _, r := range out["id"] {
		got = append(got, r[0])
	}
	slices.Sort(got)
	for id := range int64(400) {
		if !del(id) {
			want = append(want, id)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%d rows; want %d", len(got), len(want))
	}
}

// TestIcebergEqualityDeletesOnAStructMember: an equality delete file on
// a member of a struct column (user.uid, as a table whose rows are keyed
// by a nested id has) deletes the rows whose member matches, in its
// partition; rows whose struct is null are not matched by a value.
func TestIcebergEqualityDeletesOnAStructMember(t *testing.T) {
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "events"), icebergtest.Layout{ByPart: true, Nested: true, RowGroupRows: 100})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tab.Append(partRows(0, 1500, 4)); err != nil {
		t.Fatal(err)
	}
	// partRows puts id in part a, b or c by id mod 3; user.uid is id mod 50.
	_, meta, err := tab.DeleteEquality("a", "user.uid", []int64{3, 9, 12}, 0)
	if err != nil {
		t.Fatal(err)
	}
	del := func(id int64) bool {
		uid, ok := icebergtest.UserOf(id)
		return id%3 == 0 && ok && (uid == 3 || uid == 9 || uid == 12)
	}
	want := idRange(0, 1500, func(id int64) bool { return !del(id) })
	if len(want) == 1500 || len(want) < 1400 {
		t.Fatalf("the delete file deletes %d rows: change the test's values", 1500-len(want))
	}
	dir := t.TempDir()
	src := fmt.Sprintf("inputs: [%q]\nbatch: {size: 64, last: keep}\nring: {dir: %q, name: t, slots: 4}\ncolumns: [id, user.uid]\n", "iceberg:"+meta, dir)
	_, out := runRowsStats(t, src, dir)
	var got []int64
	for i, r := range out["id"] {
		if uid, ok := icebergtest.UserOf(r[0]); ok && out["user.uid"][i][0] != uid {
			t.Fatalf("row %d: user.uid %d, want %d", r[0], out["user.uid"][i][0], uid)
		}
		got = append(got, r[0])
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("%d rows; want %d", len(got), len(want))
	}
}
