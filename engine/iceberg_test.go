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

// icebergTable writes a table partitioned by part: snapshot 1 holds ids
// 0..999 (parts a..d), snapshot 2 adds ids 1000..1499 (parts a and b).
func icebergTable(t *testing.T) (tab *icebergtest.Table, s1, s2 int64, meta string) {
	t.Helper()
	return icebergTableIn(t, icebergtest.Layout{ByPart: true})
}

// icebergTableIn is icebergTable with layout l.
func icebergTableIn(t *testing.T, l icebergtest.Layout) (tab *icebergtest.Table, s1, s2 int64, meta string) {
	t.Helper()
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "events"), l)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(start, n, parts int) []icebergtest.Row {
		rows := make([]icebergtest.Row, n)
		for i := range rows {
			id := int64(start + i)
			rows[i] = icebergtest.Row{ID: id, Part: string(rune('a' + int(id)%parts)), Key: id % 97, Score: float64(id)}
		}
		return rows
	}
	if s1, _, err = tab.Append(mk(0, 1000, 4)); err != nil {
		t.Fatal(err)
	}
	if s2, meta, err = tab.Append(mk(1000, 500, 2)); err != nil {
		t.Fatal(err)
	}
	return tab, s1, s2, meta
}

// allRows returns every row_id the ranks got, sorted.
func allRows(t *testing.T, res []got) []int64 {
	t.Helper()
	var ids []int64
	for r, g := range res {
		if g.err != nil {
			t.Fatalf("rank %d: %v", r, g.err)
		}
		for _, b := range g.rows {
			ids = append(ids, b...)
		}
	}
	slices.Sort(ids)
	return ids
}

func idRange(lo, hi int64, keep func(int64) bool) []int64 {
	var out []int64
	for id := lo; id < hi; id++ {
		if keep == nil || keep(id) {
			out = append(out, id)
		}
	}
	return out
}

func TestIcebergSnapshots(t *testing.T) {
	_, s1, s2, meta := icebergTable(t)
	for _, tc := range []struct {
		name   string
		input  string
		filter string
		want   []int64
		pruned int
	}{
		{"current snapshot", "iceberg:" + meta, "", idRange(0, 1500, nil), 0},
		{"snapshot 2 by id", fmt.Sprintf("iceberg:%s?snapshot=%d", meta, s2), "", idRange(0, 1500, nil), 0},
		{"snapshot 1 by id", fmt.Sprintf("iceberg:%s?snapshot=%d", meta, s1), "", idRange(0, 1000, nil), 0},
		// part c has one file (snapshot 1's); the five others are pruned.
		{"partition pruned", "iceberg:" + meta, `part == "c"`, idRange(0, 1000, func(id int64) bool { return id%4 == 2 }), 5},
		// column statistics: only snapshot 2's two files hold ids >= 1000.
		{"statistics pruned", "iceberg:" + meta, `row_id >= 1200`, idRange(1200, 1500, nil), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pipeline := "  - rename: {id: row_id}\n"
			if tc.filter != "" {
				pipeline += fmt.Sprintf("  - filter: {expr: '%s'}\n", tc.filter)
			}
			src := fmt.Sprintf("inputs: [%q]\nbatch: {size: 10, last: keep}\nring: {dir: RINGDIR, name: t, slots: 3}\npipeline:\n%s  - select: [row_id]\n", tc.input, pipeline)
			st, res, err := runJob(t, src)
			if err != nil {
				t.Fatal(err)
			}
			if got := allRows(t, res); !slices.Equal(got, tc.want) {
				t.Errorf("%d rows (first %v), want %d", len(got), got[:min(5, len(got))], len(tc.want))
			}
			if st.FilesPruned != tc.pruned {
				t.Errorf("pruned %d files, want %d", st.FilesPruned, tc.pruned)
			}
		})
	}
}

// TestIcebergDeletesRefused: deletes that cannot be applied (here a
// position past its data file's end) fail Check and Run, naming the
// delete file's problem.
func TestIcebergDeletesRefused(t *testing.T) {
	tab, _, _, _ := icebergTable(t)
	_, meta, err := tab.DeletePositions([]icebergtest.Position{{File: tab.DataFiles()[0], Pos: 1 << 20}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	job, err := spec.Parse("j.yaml", []byte(fmt.Sprintf("inputs: [%q]\nbatch: {size: 10}\nring: {dir: %s, name: t}\n", "iceberg:"+meta, t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	err = engine.Check(context.Background(), job, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "deletes row 1048576 of") {
		t.Fatalf("Check of a table with a delete past a file's end: %v", err)
	}
	_, err = engine.Run(context.Background(), job, engine.Options{})
	if err == nil || !strings.Contains(err.Error(), "deletes row 1048576 of") {
		t.Fatalf("Run of a table with a delete past a file's end: %v", err)
	}
}

// A job pinned to the current snapshot keeps reading it after a commit.
func TestIcebergPin(t *testing.T) {
	tab, _, s2, meta := icebergTable(t)
	job, err := spec.Parse("j.yaml", []byte(fmt.Sprintf("inputs: [%q]\nbatch: {size: 10}\n", "iceberg:"+meta)))
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := engine.PinInputs(context.Background(), job, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("iceberg:%s?snapshot=%d", meta, s2)
	if pinned.Inputs[0] != want || job.Inputs[0] != "iceberg:"+meta {
		t.Fatalf("pinned %q (job %q), want %q", pinned.Inputs[0], job.Inputs[0], want)
	}
	again, err := engine.PinInputs(context.Background(), pinned, nil)
	if err != nil || again != pinned {
		t.Errorf("pinning a pinned job: %v, same job %v", err, again == pinned)
	}
	_ = tab
}

// TestIcebergRenamedColumn: after ALTER TABLE RENAME COLUMN id TO row_id,
// the data files still name the column "id", with its field id or, in an
// imported table, through the table's name mapping; a job reads it as
// row_id, prunes by it, and refuses the old name.
func TestIcebergRenamedColumn(t *testing.T) {
	for _, imported := range []bool{false, true} {
		t.Run(fmt.Sprintf("imported=%v", imported), func(t *testing.T) {
			testRenamedColumn(t, icebergtest.Layout{ByPart: true, Imported: imported})
		})
	}
}

func testRenamedColumn(t *testing.T, l icebergtest.Layout) {
	tab, _, _, _ := icebergTableIn(t, l)
	meta, err := tab.Rename("id", "row_id")
	if err != nil {
		t.Fatal(err)
	}
	in := fmt.Sprintf("inputs: [%q]\nbatch: {size: 10, last: keep}\nring: {dir: RINGDIR, name: t, slots: 3}\n", "iceberg:"+meta)
	tests := []struct {
		name     string
		src      string
		want     []int64
		pruned   int
		err      string // what Run says, and Check says checkErr
		checkErr string
	}{
		{"no pipeline", in + "columns: [row_id]\n", idRange(0, 1500, nil), 0, "", ""},
		{"a filter that prunes by statistics", in + "pipeline:\n  - filter: {expr: 'row_id >= 1200'}\n  - select: [row_id]\n",
			idRange(1200, 1500, nil), 4, "", ""},
		{"the old name", in + "columns: [id, score]\n", nil, 0, `the table has no column "id"`, `unknown column "id"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job, err := spec.Parse("t.yaml", []byte(strings.ReplaceAll(tc.src, "RINGDIR", t.TempDir())))
			if err != nil {
				t.Fatal(err)
			}
			cerr := engine.Check(context.Background(), job, nil, nil)
			st, res, err := runJob(t, tc.src)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || cerr == nil || !strings.Contains(cerr.Error(), tc.checkErr) {
					t.Fatalf("run: %v; check: %v; want %q and %q", err, cerr, tc.err, tc.checkErr)
				}
				return
			}
			if err != nil || cerr != nil {
				t.Fatal(err, cerr)
			}
			if got := allRows(t, res); !slices.Equal(got, tc.want) {
				t.Errorf("%d rows (first %v), want %d", len(got), got[:min(5, len(got))], len(tc.want))
			}
			if st.FilesPruned != tc.pruned {
				t.Errorf("pruned %d files, want %d", st.FilesPruned, tc.pruned)
			}
		})
	}
}
