package ops_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/ops"
)

// runner runs a program the way an engine worker does, reusing every
// buffer (the State, the early and late batches, the output) from call to
// call, so that a buffer shared by mistake shows up as wrong output.
type runner struct {
	p                *ops.Program
	st               *ops.State
	early, late, out column.Batch
}

func newRunner(p *ops.Program) *runner { return &runner{p: p, st: p.NewState()} }

// run returns the output for b, valid until the next call.
func (r *runner) run(b *column.Batch) (*column.Batch, error) {
	copyInto(&r.early, b, r.p.Early())
	sel, err := r.st.Select(&r.early, nil)
	if err != nil {
		return nil, err
	}
	var needs column.Batch
	copyInto(&needs, b, r.p.Needs())
	r.late.Gather(&needs, sel)
	if err := r.st.Apply(&r.late, &r.out); err != nil {
		return nil, err
	}
	return &r.out, r.out.Check()
}

func copyInto(dst, src *column.Batch, cols []string) {
	dst.Columns = dst.Columns[:0]
	for _, name := range cols {
		dst.Columns = append(dst.Columns, column.Column{})
		c := &dst.Columns[len(dst.Columns)-1]
		s := src.Col(name)
		*c = *s
		c.Data = append([]byte(nil), s.Data...)
		c.Offsets = append([]int64(nil), s.Offsets...)
		if s.Valid != nil {
			c.Valid = append([]byte(nil), s.Valid...)
		}
	}
	dst.Rows = src.Rows
}

func slice(b *column.Batch, lo, hi int) *column.Batch {
	out := new(column.Batch)
	out.AppendRows(b, lo, hi)
	return out
}

// sameBatch compares two batches value by value (a nil validity equals
// one of all ones).
func sameBatch(a, b *column.Batch) error {
	if a.Rows != b.Rows || len(a.Columns) != len(b.Columns) {
		return fmt.Errorf("%d rows × %d columns vs %d × %d", a.Rows, len(a.Columns), b.Rows, len(b.Columns))
	}
	for i := range a.Columns {
		x, y := &a.Columns[i], &b.Columns[i]
		if x.Name != y.Name || x.Kind != y.Kind || x.DType != y.DType || x.Width != y.Width {
			return fmt.Errorf("column %d: %s %v %v %d vs %s %v %v %d", i, x.Name, x.Kind, x.DType, x.Width, y.Name, y.Kind, y.DType, y.Width)
		}
		if !bytes.Equal(x.Data, y.Data) || (x.Kind != column.Fixed && !slices.Equal(x.Offsets, y.Offsets)) {
			return fmt.Errorf("column %s: values differ", x.Name)
		}
		for r := range x.Len {
			if (x.Valid == nil || x.Valid[r] != 0) != (y.Valid == nil || y.Valid[r] != 0) {
				return fmt.Errorf("column %s: validity of row %d differs", x.Name, r)
			}
		}
	}
	return nil
}

// everyOp is a pipeline with every op, over testdata/small.
func everyOp(t testing.TB) []string {
	dir := t.TempDir()
	spam, side := filepath.Join(dir, "spam.parquet"), filepath.Join(dir, "side.parquet")
	var rows []intRow
	for u := range int64(3000) {
		if u%97 == 0 {
			rows = append(rows, intRow{ID: u})
		}
	}
	writeTable(t, spam, rows)
	rows = rows[:0]
	for u := range int64(5000) {
		r := intRow{ID: u * 2, Tag: fmt.Sprint("tag", u%13)}
		if u%3 != 0 {
			r.Score = ptr(u)
		}
		rows = append(rows, r)
	}
	writeTable(t, side, rows)
	return []string{
		fmt.Sprintf("- join: {kind: anti, table: %s, on: user_id, table_key: id}", spam),
		fmt.Sprintf("- join: {kind: left, table: %s, on: user_id, table_key: id, columns: [score, tag]}", side),
		`- filter: "dense_0 > -1.5 or is_null(dense_opt)"`,
		`- sample: {key: row_id, rates: [{when: "label == 1", rate: 1}, {when: "cat_0 < 10", rate: 0.3}, {rate: 0.5}], weight: w}`,
		`- map: {h: "hash_mod(query_opt, 100)", d: "fill_null(dense_opt, 0) * 2", sc: "fill_null(score, -1)"}`,
		"- cast: {dense_1: bfloat16, seq_1: int32}",
		"- nulls: {policy: fill, columns: [cat_opt], fill: 7}",
		"- nulls: {policy: skip, columns: [query_opt]}",
		"- sequence: {column: seq_0, length: 16, lengths: n0, on_long: skip}",
		"- sequence: {column: seq_opt, length: 8, truncate: right, pad_side: left, pad_value: -1}",
		"- sequence: {column: seq_1, length: 0, max_length: 20, lengths: n1}",
		"- drop: [query]",
		"- rename: {dense_2: d2}",
	}
}

// TestSplitUnits checks that the output of a unit equals the outputs of
// its two halves, one after the other, whatever the cut: the pipeline's
// result does not depend on unit boundaries.
func TestSplitUnits(t *testing.T) {
	plan := smallPlan(t)
	j := job(t, "", everyOp(t)...)
	p, err := ops.Compile(context.Background(), j, plan.Fields, ops.Env{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(p)
	whole, halves := newRunner(p), newRunner(p)
	total := 0
	for u := range plan.Units {
		b := decodeUnit(t, plan, u)
		got, err := whole.run(b)
		if err != nil {
			t.Fatal(err)
		}
		want := slice(got, 0, got.Rows)
		total += want.Rows
		for _, cut := range []int{0, 1, b.Rows / 3, b.Rows / 2, b.Rows - 1} {
			var cat column.Batch
			for _, part := range [][2]int{{0, cut}, {cut, b.Rows}} {
				if part[0] == part[1] {
					continue
				}
				out, err := halves.run(slice(b, part[0], part[1]))
				if err != nil {
					t.Fatal(err)
				}
				if out.Rows > 0 {
					cat.AppendRows(out, 0, out.Rows)
				}
			}
			if err := sameBatch(want, &cat); err != nil {
				t.Fatalf("unit %d cut at %d: %v", u, cut, err)
			}
		}
	}
	if total == 0 {
		t.Fatal("no rows survived")
	}
	t.Logf("%d rows out of %d", total, plan.Rows)
}

// TestSelectSel checks that Select over a preselection equals Select over
// those rows alone.
func TestSelectSel(t *testing.T) {
	plan := smallPlan(t)
	p, err := ops.Compile(context.Background(), job(t, "", everyOp(t)...), plan.Fields, ops.Env{})
	if err != nil {
		t.Fatal(err)
	}
	b := decodeUnit(t, plan, 0)
	st := p.NewState()
	var pre []int32
	for i := 0; i < b.Rows; i += 3 {
		pre = append(pre, int32(i))
	}
	var early, sub column.Batch
	copyInto(&early, b, p.Early())
	got, err := st.Select(&early, pre)
	if err != nil {
		t.Fatal(err)
	}
	got = slices.Clone(got)
	sub.Gather(&early, pre)
	want, err := st.Select(&sub, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range want {
		want[i] = pre[r]
	}
	if !slices.Equal(got, want) {
		t.Errorf("select over a preselection kept %d rows, over the rows alone %d", len(got), len(want))
	}
}
