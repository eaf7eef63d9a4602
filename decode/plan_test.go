package decode

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go"
)

func writeGeneric[T any](t *testing.T, path string, rows []T) {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPlanOrder(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b.parquet", "a.parquet", "sub/c.parquet", "sub/skip.txt"} {
		writeFile(t, filepath.Join(dir, name), fileSpec{rows: 10, codec: "none"})
	}
	ctx := context.Background()
	cases := []struct {
		desc   string
		inputs []string
		want   []string
	}{
		{"directory, recursive and sorted", []string{dir}, []string{"a.parquet", "b.parquet", "sub/c.parquet", "sub/skip.txt"}[:3]},
		{"glob", []string{filepath.Join(dir, "*.parquet")}, []string{"a.parquet", "b.parquet"}},
		{"files keep input order, duplicates dropped", []string{filepath.Join(dir, "b.parquet"), dir}, []string{"b.parquet", "a.parquet", "sub/c.parquet"}},
	}
	for _, c := range cases {
		p1, err := PlanFiles(ctx, c.inputs, PlanOptions{Columns: []string{"row_id"}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range p1.Files {
			rel, _ := filepath.Rel(dir, f.Path)
			got = append(got, rel)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: files %q, want %q", c.desc, got, c.want)
		}
		p2, err := PlanFiles(ctx, c.inputs, PlanOptions{Columns: []string{"row_id"}})
		if err != nil || !reflect.DeepEqual(p1, p2) {
			t.Errorf("%s: planning twice differs (%v)", c.desc, err)
		}
	}
	if _, err := PlanFiles(ctx, []string{filepath.Join(dir, "none-*.parquet")}, PlanOptions{}); err == nil {
		t.Error("empty glob: no error")
	}
}

func TestPlanSlicing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.parquet")
	writeFile(t, p, fileSpec{rows: 5000, rowGroupRows: 2000, codec: "snappy", pageBytes: 4096})
	for _, noOI := range []bool{false, true} {
		for _, max := range []int64{1, 333, 1000, 1999, 2000, 5000} {
			if max == 1 && !noOI {
				continue
			}
			plan, err := PlanFiles(context.Background(), []string{p}, PlanOptions{MaxUnitRows: max, IgnoreOffsetIndex: noOI, Columns: []string{"row_id", "seq_0"}})
			if err != nil {
				t.Fatal(err)
			}
			// Every row of every row group exactly once, in order.
			next := map[int]int64{}
			for i, u := range plan.Units {
				if u.Seq != i || u.RowStart != next[u.RowGroup] || u.Rows < 1 || u.Rows > max {
					t.Fatalf("max %d noOI %v: unit %d = rg %d [%d,+%d), want start %d", max, noOI, i, u.RowGroup, u.RowStart, u.Rows, next[u.RowGroup])
				}
				next[u.RowGroup] += u.Rows
			}
			if next[0] != 2000 || next[1] != 2000 || next[2] != 1000 || plan.Rows != 5000 {
				t.Fatalf("max %d: row groups covered %v", max, next)
			}
			if max == 1 || max == 333 && !noOI {
				checkPlan(t, plan, func(u Unit) int64 { return u.Ordinal })
			}
		}
	}
}

type altRow struct {
	RowID int64 `parquet:"row_id"`
	Label int64 `parquet:"label"`
}

type badRow struct {
	RowID int64  `parquet:"row_id"`
	U64   uint64 `parquet:"u64"`
	Inner struct {
		A int64 `parquet:"a"`
	} `parquet:"inner"`
	Nested [][]int64 `parquet:"nested,list"`
}

func TestPlanErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "a.parquet")
	writeFile(t, good, fileSpec{rows: 10, codec: "none"})
	alt := filepath.Join(dir, "b.parquet")
	writeGeneric(t, alt, []altRow{{1, 2}})
	bad := filepath.Join(t.TempDir(), "bad.parquet")
	writeGeneric(t, bad, []badRow{{RowID: 1}})
	ctx := context.Background()
	f := func(desc string, inputs, cols []string, sentinel error, file, col string) {
		t.Helper()
		_, err := PlanFiles(ctx, inputs, PlanOptions{Columns: cols})
		if !errors.Is(err, sentinel) {
			t.Fatalf("%s: got %v, want %v", desc, err, sentinel)
		}
		msg := err.Error()
		if !strings.Contains(msg, file) || !strings.Contains(msg, col) {
			t.Fatalf("%s: %q does not name file %s and column %s", desc, msg, file, col)
		}
	}
	f("mismatch", []string{dir}, []string{"row_id", "label"}, ErrSchemaMismatch, alt, `"label"`)
	f("missing", []string{good}, []string{"row_id", "nope"}, ErrMissingColumn, good, `"nope"`)
	f("group", []string{bad}, []string{"inner"}, ErrUnsupported, bad, `"inner"`)
	f("nested list", []string{bad}, []string{"nested"}, ErrUnsupported, bad, `"nested"`)
	// Every column: the readable ones, and the others listed with why.
	all, err := PlanFiles(ctx, []string{bad}, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Fields) != 3 || len(all.Unreadable) != 1 || all.Unreadable[0].Name != "nested" || all.Unreadable[0].Why != "a list of lists or of maps" {
		t.Fatalf("every column: fields %+v, unreadable %+v", all.Fields, all.Unreadable)
	}
	// Files with more or fewer columns than the first, every column
	// projected: a mismatch naming both, in either order.
	few := filepath.Join(t.TempDir(), "a.parquet")
	writeGeneric(t, few, []struct {
		RowID int64 `parquet:"row_id"`
	}{{1}})
	f("fewer columns", []string{bad, few}, nil, ErrSchemaMismatch, few, "1 columns vs 3")
	f("more columns", []string{few, bad}, nil, ErrSchemaMismatch, bad, "3 columns vs 1")
	// Files that agree on the projection plan fine together.
	if _, err := PlanFiles(ctx, []string{dir}, PlanOptions{Columns: []string{"row_id"}}); err != nil {
		t.Fatal(err)
	}
}

// TestProjectionReadsOnlyProjected decodes the fixture whose seq_0 page
// is corrupt, projecting the other columns: they must decode, proving the
// bad chunk is not read.
func TestProjectionReadsOnlyProjected(t *testing.T) {
	path := filepath.Join(fixtures, "corrupt", "badpage.parquet")
	plan, err := PlanFiles(context.Background(), []string{path}, PlanOptions{Columns: []string{"row_id", "dense_0", "cat_0", "query"}})
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(plan.Fields)
	defer d.Close()
	var b column.Batch
	for _, u := range plan.Units {
		if err := d.Decode(context.Background(), u, &b); err != nil {
			t.Fatal(err)
		}
		if len(b.Columns) != 4 || b.Columns[0].Name != "row_id" || b.Columns[3].Name != "query" {
			t.Fatalf("columns %v", b.Columns)
		}
	}
}

func TestUnitMarshal(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.parquet")
	writeFile(t, p, fileSpec{rows: 3000, rowGroupRows: 1000, codec: "snappy", pageBytes: 2048})
	plan, err := PlanFiles(context.Background(), []string{p}, PlanOptions{MaxUnitRows: 400})
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(plan.Fields)
	defer d.Close()
	var b1, b2 column.Batch
	for _, u := range plan.Units {
		data, err := u.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var v Unit
		if err := v.UnmarshalBinary(data); err != nil {
			t.Fatal(err)
		}
		if v.Bounds != nil {
			t.Fatalf("round trip: the row group's statistics travelled: %+v", v.Bounds)
		}
		sent := u
		sent.Bounds = nil // planning's, not the unit's to carry
		if !reflect.DeepEqual(sent, v) {
			t.Fatalf("round trip: %+v != %+v", v, sent)
		}
		if err := d.Decode(context.Background(), u, &b1); err != nil {
			t.Fatal(err)
		}
		if err := d.Decode(context.Background(), v, &b2); err != nil {
			t.Fatal(err)
		}
		for i := range b1.Columns {
			if diff := diffColumn(&b2.Columns[i], &b1.Columns[i]); diff != "" {
				t.Fatal(diff)
			}
		}
	}
	data, _ := plan.Units[0].MarshalBinary()
	data[0] = 9
	var v Unit
	if err := v.UnmarshalBinary(data); err == nil {
		t.Fatal("unknown version accepted")
	}
}

func TestFileChanged(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.parquet")
	writeFile(t, p, fileSpec{rows: 100, codec: "snappy"})
	plan, err := PlanFiles(context.Background(), []string{p}, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(plan.Fields)
	defer d.Close()
	var b column.Batch
	if err := d.Decode(context.Background(), plan.Units[0], &b); err != nil {
		t.Fatal(err)
	}
	later := time.Unix(0, plan.Units[0].ModTime).Add(time.Second)
	if err := os.Chtimes(p, later, later); err != nil {
		t.Fatal(err)
	}
	err = d.Decode(context.Background(), plan.Units[0], &b)
	var e *Error
	if !errors.Is(err, ErrFileChanged) || !errors.As(err, &e) || e.File != p {
		t.Fatalf("got %v, want ErrFileChanged naming the file", err)
	}
	writeFile(t, p, fileSpec{rows: 50, codec: "snappy"}) // replaced: a new size
	if err := d.Decode(context.Background(), plan.Units[0], &b); !errors.Is(err, ErrFileChanged) {
		t.Fatalf("replaced file: got %v", err)
	}
}
