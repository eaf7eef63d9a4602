package ops_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/expr"
	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/ops"
)

type tsRow struct {
	ID int64 `parquet:"id"`
	TS int64 `parquet:"ts,timestamp(microsecond)"`
}

// A side table's timestamp column joined into the rows is a timestamp
// column: a timestamp() without a unit compared with it counts its unit
// (microseconds here), as for an input column (docs/expressions.md).
// Counting nanoseconds instead silently drops every row of a ts >= T
// window.
func TestJoinedTimestampKeepsUnit(t *testing.T) {
	day := func(s string) int64 {
		v, err := time.Parse(time.DateOnly, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UnixMicro()
	}
	path := filepath.Join(t.TempDir(), "ts.parquet")
	writeTable(t, path, []tsRow{{ID: 1, TS: day("2025-11-19")}, {ID: 2, TS: day("2025-11-20")}, {ID: 3, TS: day("2025-11-21")}})
	b := batchOf(i64col("user", []int64{1, 2, 3, 4}, nil), i64col("row", []int64{0, 1, 2, 3}, nil))
	p := compile(t, b, "",
		fmt.Sprintf("- join: {kind: left, table: %s, on: user, table_key: id, columns: [ts]}", path),
		`- filter: 'ts >= timestamp("2025-11-20")'`)
	if got := ints2(t, run(t, p, b), "row"); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("kept rows %v, want [1 2] (the joined ts counts microseconds)", got)
	}
	// A unit that is not the column's is refused, as for an input column.
	j := job(t, "",
		fmt.Sprintf("- join: {kind: left, table: %s, on: user, table_key: id, columns: [ts]}", path),
		`- filter: 'ts >= timestamp("2025-11-20", "ns")'`)
	if _, err := ops.Compile(context.Background(), j, fieldsOf(b), ops.Env{}); err == nil {
		t.Errorf("a ns timestamp() against the joined microsecond column compiled")
	}
}

// A nulls fill of a timestamp column (with a value other than 0, which
// writes a new column) leaves it a timestamp column of its unit: a later
// filter's timestamp() counts microseconds, as it does with fill 0 or
// before the fill.
func TestFilledTimestampKeepsUnit(t *testing.T) {
	us := func(s string) int64 {
		v, err := time.Parse(time.DateOnly, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UnixMicro()
	}
	b := batchOf(i64col("ts", []int64{us("2025-11-19"), us("2025-11-20"), 0, us("2025-11-21")}, []byte{1, 1, 0, 1}), i64col("row", []int64{0, 1, 2, 3}, nil))
	fields := fieldsOf(b)
	fields[0].TimeUnit = 1000
	for _, fill := range []string{"0", "-1"} {
		j := job(t, "", "- nulls: {policy: fill, columns: [ts], fill: "+fill+"}", `- filter: 'ts >= timestamp("2025-11-20")'`)
		p, err := ops.Compile(context.Background(), j, fields, ops.Env{})
		if err != nil {
			t.Fatalf("fill %s: %v", fill, err)
		}
		if got := ints2(t, run(t, p, b), "row"); !slices.Equal(got, []int64{1, 3}) {
			t.Errorf("fill %s: kept rows %v, want [1 3] (the filled ts counts microseconds)", fill, got)
		}
	}
}

// After a nulls fill with 0 (which keeps the input column, its null rows
// holding zeros already), a row group's statistics still describe the
// input with its nulls: a filter x == 0 must not be ruled out by them
// where the row group has nulls, which the fill made 0.
func TestPruneAfterZeroFill(t *testing.T) {
	b := batchOf(i64col("x", []int64{7, 0, 9}, []byte{1, 0, 1}))
	for _, fill := range []string{"0", "-1"} {
		want := "x == " + fill
		p := compile(t, b, "", "- nulls: {policy: fill, columns: [x], fill: "+fill+"}", "- filter: '"+want+"'")
		out := run(t, p, b)
		if got := ints2(t, out, "x"); !slices.Equal(got, []int64{mustInt(t, fill)}) {
			t.Fatalf("fill %s: rows %v", fill, got)
		}
		for _, r := range []expr.Range{
			{NullCount: 10, Rows: 10},                                  // every row null
			{Min: 5, Max: 10, HasBounds: true, NullCount: 3, Rows: 10}, // some nulls, values above the fill
		} {
			stats := func(name string) (expr.Range, bool) { return r, name == "x" }
			if !p.Prune(stats) {
				t.Errorf("fill %s, filter %s: a row group with stats %+v is ruled out, but its null rows are %s now", fill, want, r, fill)
			}
		}
	}
}

func mustInt(t *testing.T, s string) int64 {
	var v int64
	if _, err := fmt.Sscan(s, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// The same for a string column, whose null rows read as "" after a fill.
func TestPruneAfterStringFill(t *testing.T) {
	b := batchOf(strcol("s", []string{"b", "", "c"}, []byte{1, 0, 1}), i64col("row", []int64{0, 1, 2}, nil))
	p := compile(t, b, "", "- nulls: {policy: fill, columns: [s]}", `- filter: 's == ""'`)
	if got := ints2(t, run(t, p, b), "row"); !slices.Equal(got, []int64{1}) {
		t.Fatalf("rows %v", got)
	}
	for _, r := range []expr.Range{
		{NullCount: 10, Rows: 10},
		{MinString: "a", MaxString: "z", HasBounds: true, NullCount: 3, Rows: 10},
	} {
		stats := func(name string) (expr.Range, bool) { return r, name == "s" }
		if !p.Prune(stats) {
			t.Errorf("a row group with stats %+v is ruled out, but its null rows are \"\" now", r)
		}
	}
	// Before the fill the statistics hold as they are.
	p = compile(t, b, "", `- filter: 's == ""'`, "- nulls: {policy: fill, columns: [s]}")
	if p.Prune(func(name string) (expr.Range, bool) { return expr.Range{NullCount: 10, Rows: 10}, name == "s" }) {
		t.Errorf("an all-null row group is not ruled out by s == \"\" before the fill")
	}
}

// Whether a bucket join's layout check fails must not depend on the order
// a worker's State has learned to run Select's drops in (reorder, by
// timings): a unit holding one row in the wrong bucket, which a filter
// declared before the join drops, gives the same outcome on a fresh State
// as on one that has seen other units first.
func TestBucketCheckIndependentOfDropOrder(t *testing.T) {
	dir := t.TempDir()
	files := bucketedData(t, dir)
	fields := inputFields(t, files)
	var stray int64 = 1
	for iceberg.BucketInt(nBuckets, stray) == 0 {
		stray++
	}
	bad := filepath.Join(dir, "in", "bucket=0", "stray.parquet")
	writeTable(t, bad, []inRow{{ID: 9999, Key: stray}})
	p, err := ops.Compile(context.Background(), job(t, dir, "- filter: 'id != 9999'", "- join: {kind: semi, table: side, on: key, buckets: 8}"), fields, ops.Env{})
	if err != nil {
		t.Fatal(err)
	}
	runOn := func(st *ops.State, files []string) error {
		ctx := context.Background()
		plan, err := decode.PlanFiles(ctx, files, decode.PlanOptions{Columns: []string{"id", "key"}})
		if err != nil {
			return err
		}
		dec := plan.NewDecoder()
		defer dec.Close()
		for _, u := range plan.Units {
			var b column.Batch
			if err := dec.Decode(ctx, u, &b); err != nil {
				return err
			}
			st.BeginUnit(ctx, u.File)
			_, err := runErr(p, st, &b)
			st.EndUnit()
			if err != nil {
				return err
			}
		}
		return nil
	}
	fresh := runOn(p.NewState(), []string{bad})
	st := p.NewState()
	if err := runOn(st, files); err != nil {
		t.Fatal(err)
	}
	seasoned := runOn(st, []string{bad})
	if (fresh == nil) != (seasoned == nil) {
		t.Errorf("the stray unit on a fresh State: %v; after other units: %v", fresh, seasoned)
	}
}

// A Hive date partition column (dt=2025-11-20) holds days since 1970 as a
// DATE column does: a timestamp() without a unit compared with it counts
// days (docs/expressions.md), and one with a unit is refused. Without the
// partition field's unit, timestamp() counted nanoseconds: dt >= T kept
// nothing (and partition pruning would exclude every file).
func TestDatePartitionCountsDays(t *testing.T) {
	b := batchOf(i64col("row", []int64{0, 1, 2}, nil), i32col("dt", []int32{20411, 20412, 20413}, nil))
	fields := []decode.Field{fieldsOf(b)[0], decode.PartitionKey{Name: "dt", Type: decode.PartitionDate}.Field()}
	p, err := ops.Compile(context.Background(), job(t, "", `- filter: 'dt >= timestamp("2025-11-20")'`), fields, ops.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ints2(t, run(t, p, b), "row"); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("kept rows %v, want [1 2] (dt counts days)", got)
	}
	if _, err := ops.Compile(context.Background(), job(t, "", `- filter: 'dt >= timestamp("2025-11-20", "us")'`), fields, ops.Env{}); err == nil {
		t.Errorf("a microsecond timestamp() against the date partition compiled")
	}
}
