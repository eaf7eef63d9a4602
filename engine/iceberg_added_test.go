package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/iceberg/icebergtest"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// addedRow is what a row of addedTable reads as: weight and tags are
// null (ok false) in the rows written before the columns were added.
type addedRow struct {
	weight   float64
	weightOK bool
	tags     []int64
	tagsOK   bool
}

// wantAdded is row id's weight and tags: ids 0..999 were written before
// ALTER TABLE ADD COLUMN; of the later ones, odd ids have no weight,
// every third id no tags and every fifth an empty list.
func wantAdded(id int64) addedRow {
	if id < 1000 {
		return addedRow{}
	}
	r := addedRow{weight: float64(id) / 4, weightOK: id%2 == 0, tagsOK: id%3 != 0}
	if r.tagsOK && id%5 != 0 {
		r.tags = []int64{id, id + 1}
	}
	if !r.weightOK {
		r.weight = 0
	}
	return r
}

// addedTable is a table partitioned by part whose snapshot 1 holds ids
// 0..999 (id renamed row_id later), and snapshot 2, after AddColumns,
// ids 1000..1499 with weight and tags as wantAdded says.
func addedTable(t *testing.T, l icebergtest.Layout) string {
	t.Helper()
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "events"), l)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(start, n int) []icebergtest.Row {
		rows := make([]icebergtest.Row, n)
		for i := range rows {
			id := int64(start + i)
			w := wantAdded(id)
			rows[i] = icebergtest.Row{ID: id, Part: string(rune('a' + int(id)%3)), Key: id % 97, Score: float64(id)}
			if w.weightOK {
				rows[i].Weight = &w.weight
			}
			if w.tagsOK {
				rows[i].Tags = append([]int64{}, w.tags...)
			}
		}
		return rows
	}
	if _, _, err := tab.Append(mk(0, 1000)); err != nil {
		t.Fatal(err)
	}
	if _, err := tab.AddColumns(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tab.Append(mk(1000, 500)); err != nil {
		t.Fatal(err)
	}
	meta, err := tab.Rename("id", "row_id")
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

// TestIcebergAddedColumns: after ALTER TABLE ADD COLUMN, the data files
// written before read the new columns as nulls, whichever file comes
// first, in files with field ids and in imported ones read through the
// name mapping; a filter on a new column skips the old files' row groups
// by their statistics (every row null).
func TestIcebergAddedColumns(t *testing.T) {
	for _, imported := range []bool{false, true} {
		t.Run(fmt.Sprintf("imported=%v", imported), func(t *testing.T) {
			meta := addedTable(t, icebergtest.Layout{ByPart: true, Imported: imported})
			in := fmt.Sprintf("inputs: [%q]\nbatch: {size: 64, last: keep}\nring: {dir: RINGDIR, name: t, slots: 3}\n", "iceberg:"+meta)
			tests := []struct {
				name   string
				src    string
				ids    []int64
				pruned int
			}{
				{"the new columns", in + "columns: [row_id, weight, tags]\n", idRange(0, 1500, nil), 0},
				{"every column", in, idRange(0, 1500, nil), 0},
				{"a filter on a new column", in + "pipeline:\n  - filter: {expr: 'weight > 300'}\n  - select: [row_id, weight, tags]\n",
					idRange(1202, 1500, func(id int64) bool { return id%2 == 0 }), 3},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					src := strings.ReplaceAll(tc.src, "RINGDIR", t.TempDir())
					job, err := spec.Parse("t.yaml", []byte(src))
					if err != nil {
						t.Fatal(err)
					}
					if err := engine.Check(context.Background(), job, nil, nil); err != nil {
						t.Fatalf("check: %v", err)
					}
					rows, st := runAdded(t, job)
					if got := slices.Sorted(maps.Keys(rows)); !slices.Equal(got, tc.ids) {
						t.Fatalf("%d rows (first %v), want %d", len(got), got[:min(5, len(got))], len(tc.ids))
					}
					for id, got := range rows {
						if want := wantAdded(id); !sameAdded(got, want) {
							t.Fatalf("row %d: %+v, want %+v", id, got, want)
						}
					}
					if st.UnitsPruned != tc.pruned {
						t.Errorf("pruned %d units, want %d", st.UnitsPruned, tc.pruned)
					}
				})
			}
		})
	}
}

func sameAdded(a, b addedRow) bool {
	return a.weight == b.weight && a.weightOK == b.weightOK && a.tagsOK == b.tagsOK && slices.Equal(a.tags, b.tags)
}

// runAdded runs job (world size 1) and reads row_id, weight and tags of
// every row from its ring.
func runAdded(t *testing.T, job *spec.Job) (map[int64]addedRow, engine.Stats) {
	t.Helper()
	rows := map[int64]addedRow{}
	var cerr error
	done := make(chan struct{})
	st, err := engine.Run(context.Background(), job, engine.Options{Ready: func(rings []string) {
		go func() {
			defer close(done)
			cerr = readAdded(job.Ring.Dir, rings[0], rows)
		}()
	}})
	<-done
	if err := errors.Join(err, cerr); err != nil {
		t.Fatal(err)
	}
	return rows, st
}

func readAdded(dir, name string, rows map[int64]addedRow) error {
	c, err := shm.Open(dir, name)
	if err != nil {
		return err
	}
	defer c.Close()
	for {
		b, err := c.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		ids := int64s(b.Tensor("row_id", shm.RoleDense))
		w, wv := b.Tensor("weight", shm.RoleDense), b.Tensor("weight", shm.RoleValidity)
		tv, to, tok := b.Tensor("tags", shm.RoleValues), b.Tensor("tags", shm.RoleOffsets), b.Tensor("tags", shm.RoleValidity)
		if w == nil || wv == nil || tv == nil || to == nil || tok == nil {
			return fmt.Errorf("batch %d: weight or tags missing, or not nullable", b.Seq)
		}
		weights := unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(w.Data))), b.Rows)
		vals, offs := int64s(tv), int64s(to)
		for i, id := range ids[:b.Rows] {
			r := addedRow{weight: weights[i], weightOK: wv.Data[i] != 0, tagsOK: tok.Data[i] != 0}
			if offs[i+1] > offs[i] {
				r.tags = append([]int64{}, vals[offs[i]:offs[i+1]]...)
			}
			if _, dup := rows[id]; dup {
				return fmt.Errorf("row %d twice", id)
			}
			rows[id] = r
		}
		c.Release()
	}
}

func int64s(t *shm.Tensor) []int64 {
	return unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(t.Data))), len(t.Data)/8)
}

// TestIcebergPromotedColumn: after ALTER TABLE ALTER COLUMN score TYPE
// double, the data files written before (float values, float bounds)
// read score as a double with their values, and a filter on it still
// skips them by their manifests' float bounds.
func TestIcebergPromotedColumn(t *testing.T) {
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "events"), icebergtest.Layout{ByPart: true, FloatScore: true})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(start, n int) []icebergtest.Row { return partRows(start, n, 4) }
	if _, _, err := tab.Append(mk(0, 1000)); err != nil {
		t.Fatal(err)
	}
	if _, err := tab.PromoteScore(); err != nil {
		t.Fatal(err)
	}
	_, meta, err := tab.Append(mk(1000, 500))
	if err != nil {
		t.Fatal(err)
	}
	runPruned(t, meta, []prunedCase{
		{"every row", "columns: [id, score]\n", idRange(0, 1500, nil), 0},
		{"a filter the old files' bounds rule out", "pipeline:\n  - filter: {expr: 'score >= 300.0'}\n  - select: [id, score]\n",
			idRange(1200, 1500, nil), 3},
		{"a filter inside the old files", "pipeline:\n  - filter: {expr: 'score < 10.0'}\n  - select: [id, score]\n",
			idRange(0, 40, nil), 3},
	}, func(id int64, col map[string]int64) error {
		if score := math.Float64frombits(uint64(col["score"])); score != float64(id)/4 {
			return fmt.Errorf("score %v, want %v", score, float64(id)/4)
		}
		return nil
	})
}

// TestIcebergPromotedDate: after format v3's ALTER TABLE ALTER COLUMN
// day TYPE timestamp, the data files written before (dates, date bounds)
// read day as each date's first instant in microseconds, beside the
// timestamps written since, and a filter on it skips either side by its
// manifests' bounds.
func TestIcebergPromotedDate(t *testing.T) {
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "events"), icebergtest.Layout{ByPart: true, Dated: true, FormatVersion: 3})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(start, n int) []icebergtest.Row { return partRows(start, n, 4) }
	if _, _, err := tab.Append(mk(0, 1000)); err != nil {
		t.Fatal(err)
	}
	if _, err := tab.PromoteDay(); err != nil {
		t.Fatal(err)
	}
	_, meta, err := tab.Append(mk(1000, 500))
	if err != nil {
		t.Fatal(err)
	}
	want := func(id int64) int64 {
		if id < 1000 {
			return int64(icebergtest.DayOf(id)) * 86400e6
		}
		return icebergtest.DayStamp(id)
	}
	runPruned(t, meta, []prunedCase{
		{"every row", "columns: [id, day]\n", idRange(0, 1500, nil), 0},
		{"a filter the old files' date bounds rule out", "pipeline:\n  - filter: {expr: 'day >= timestamp(\"1970-05-04\")'}\n  - select: [id, day]\n",
			idRange(1001, 1500, nil), 3},
		{"a filter the new files' bounds rule out", "pipeline:\n  - filter: {expr: 'day < timestamp(\"1970-01-01\")'}\n  - select: [id, day]\n",
			idRange(0, 140, nil), 3},
	}, func(id int64, col map[string]int64) error {
		if col["day"] != want(id) {
			return fmt.Errorf("day %d, want %d", col["day"], want(id))
		}
		return nil
	})
}

// prunedCase is a job's body over an Iceberg table, the ids it keeps
// and the data files its filter prunes.
type prunedCase struct {
	name   string
	body   string
	ids    []int64
	pruned int
}

// runPruned runs each case over the table at meta, checking each row
// (its id, and the first word of each column) with check, and the ids
// kept and the files pruned.
func runPruned(t *testing.T, meta string, cases []prunedCase, check func(id int64, col map[string]int64) error) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := fmt.Sprintf("inputs: [%q]\nbatch: {size: 64, last: keep}\nring: {dir: %q, name: t, slots: 4}\n%s", "iceberg:"+meta, dir, tc.body)
			st, out := runRowsStats(t, src, dir)
			var got []int64
			for i, r := range out["id"] {
				col := map[string]int64{}
				for name, rows := range out {
					col[name] = rows[i][0]
				}
				if err := check(r[0], col); err != nil {
					t.Fatalf("row %d: %v", r[0], err)
				}
				got = append(got, r[0])
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.ids) || st.FilesPruned != tc.pruned {
				t.Fatalf("%d rows (first %v), %d files pruned; want %d rows, %d pruned", len(got), got[:min(3, len(got))], st.FilesPruned, len(tc.ids), tc.pruned)
			}
		})
	}
}

// TestIcebergInitialDefault: a required column added with an initial
// default (format v3) reads the default in every row of the files
// written before, and a filter on it keeps or drops them all.
func TestIcebergInitialDefault(t *testing.T) {
	tab, _, _, _ := icebergTableIn(t, icebergtest.Layout{ByPart: true, FormatVersion: 3})
	meta, err := tab.AddDefaulted()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		body string
		rows int
	}{
		{"the column", "columns: [id, bonus]\n", 1500},
		{"a filter it passes", "pipeline:\n  - filter: {expr: 'bonus == 7'}\n  - select: [id, bonus]\n", 1500},
		{"a filter it fails", "pipeline:\n  - filter: {expr: 'bonus > 7'}\n  - select: [id, bonus]\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := fmt.Sprintf("inputs: [%q]\nbatch: {size: 64, last: keep}\nring: {dir: %q, name: t, slots: 4}\n%s", "iceberg:"+meta, dir, tc.body)
			_, out := runRowsStats(t, src, dir)
			if len(out["id"]) != tc.rows || len(out["bonus"]) != tc.rows {
				t.Fatalf("%d ids, %d bonuses; want %d", len(out["id"]), len(out["bonus"]), tc.rows)
			}
			for i, b := range out["bonus"] {
				if b[0] != 7 {
					t.Fatalf("row %d (id %d): bonus %d, want 7", i, out["id"][i][0], b[0])
				}
			}
		})
	}
}

// TestIcebergMigratedTimes: a table migrated from Hive, whose old files
// store ts as INT96 and whose new ones as INT64 microseconds, reads ts
// in microseconds in every file (rounded down), and a time window keeps
// the same rows of both kinds, in microseconds whether it says so or
// leaves timestamp() the column's unit.
func TestIcebergMigratedTimes(t *testing.T) {
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "events"), icebergtest.Layout{ByPart: true, Hive: true})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(start, n int) []icebergtest.Row { return partRows(start, n, 1) }
	if _, _, err := tab.Append(mk(0, 1000)); err != nil {
		t.Fatal(err)
	}
	tab.NativeWrites()
	_, meta, err := tab.Append(mk(1000, 500))
	if err != nil {
		t.Fatal(err)
	}
	cut := icebergtest.EventTime(700).Truncate(time.Microsecond) // row 700 as the table holds it
	for _, tc := range []struct {
		name string
		body string
		ids  []int64
	}{
		{"every row", "columns: [id, ts]\n", idRange(0, 1500, nil)},
		{"a time window", fmt.Sprintf("pipeline:\n  - filter: {expr: 'ts >= timestamp(\"%s\", \"us\")'}\n  - select: [id, ts]\n",
			cut.Format(time.RFC3339Nano)), idRange(700, 1500, nil)},
		{"a time window that leaves the unit to the column", fmt.Sprintf("pipeline:\n  - filter: {expr: 'ts >= timestamp(\"%s\")'}\n  - select: [id, ts]\n",
			cut.Format(time.RFC3339Nano)), idRange(700, 1500, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := fmt.Sprintf("inputs: [%q]\nbatch: {size: 64, last: keep}\nring: {dir: %q, name: t, slots: 4}\n%s", "iceberg:"+meta, dir, tc.body)
			_, out := runRowsStats(t, src, dir)
			var got []int64
			for i, r := range out["id"] {
				id := r[0]
				if ts, want := out["ts"][i][0], icebergtest.EventTime(id).UnixMicro(); ts != want {
					t.Fatalf("row %d: ts %d, want %d", id, ts, want)
				}
				got = append(got, id)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.ids) {
				t.Fatalf("%d rows (first %v), want %d", len(got), got[:min(3, len(got))], len(tc.ids))
			}
		})
	}
}

// partRows are ids start..start+n-1 in parts a, b and c by id mod 3,
// key id mod 97, score id / scoreDiv.
func partRows(start, n int, scoreDiv float64) []icebergtest.Row {
	rows := make([]icebergtest.Row, n)
	for i := range rows {
		id := int64(start + i)
		rows[i] = icebergtest.Row{ID: id, Part: string(rune('a' + int(id)%3)), Key: id % 97, Score: float64(id) / scoreDiv}
	}
	return rows
}
