package ops_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/expr"
	"github.com/lastmile/lastmile/ops"
)

func TestPrune(t *testing.T) {
	b := batchOf(i32col("label", []int32{0, 1}, nil), f32col("x", []float32{1, 2}, nil))
	stats := func(lo, hi float64) func(string) (expr.Range, bool) {
		return func(col string) (expr.Range, bool) {
			if col != "label" {
				return expr.Range{}, false
			}
			return expr.Range{Min: lo, Max: hi, HasBounds: true, NullCount: 0, Rows: 10}, true
		}
	}
	cases := []struct {
		ops    []string
		lo, hi float64
		want   bool
	}{
		{[]string{`- filter: "label == 1"`}, 0, 0, false},
		{[]string{`- filter: "label == 1"`}, 0, 1, true},
		{[]string{`- filter: "x > 0"`, `- filter: "label >= 2"`}, 0, 1, false},
		{[]string{`- rename: {label: l}`, `- filter: "l == 1"`}, 0, 0, false},
		{[]string{`- map: {label: "label + 1"}`, `- filter: "label == 1"`}, 0, 0, true}, // a computed label has no statistics
		{[]string{`- sample: {key: label, rates: [{rate: 0.5}]}`}, 0, 0, true},
	}
	for _, tc := range cases {
		p := compile(t, b, "", tc.ops...)
		if got := p.Prune(stats(tc.lo, tc.hi)); got != tc.want {
			t.Errorf("%v with label in [%v, %v]: %v, want %v", tc.ops, tc.lo, tc.hi, got, tc.want)
		}
		// The daemon's admission asks the same of a pipeline it checks
		// without loading side tables.
		prune, err := ops.Pruner(context.Background(), job(t, "", tc.ops...), fieldsOf(b), ops.Env{})
		if err != nil {
			t.Fatal(err)
		}
		if got := prune(stats(tc.lo, tc.hi)); got != tc.want {
			t.Errorf("Pruner: %v with label in [%v, %v]: %v, want %v", tc.ops, tc.lo, tc.hi, got, tc.want)
		}
	}
}

func TestEmptyBatches(t *testing.T) {
	b := batchOf(
		i64col("id", []int64{1, 2}, nil),
		listcol("s", [][]int64{{1}, {2, 3}}, []byte{1, 0}),
		strcol("q", []string{"a", "b"}, nil),
	)
	p := compile(t, b, "", `- filter: "id > 5"`, "- sequence: {column: s, length: 4, lengths: n}", `- map: {h: "hash_mod(q, 10)"}`)
	out := run(t, p, b)
	if out.Rows != 0 || len(out.Columns) != 5 {
		t.Fatalf("%d rows, columns %v", out.Rows, names(out))
	}
	empty := slice(b, 0, 0)
	out = run(t, p, empty)
	if out.Rows != 0 {
		t.Fatalf("%d rows", out.Rows)
	}
}

func TestSelectApplyContract(t *testing.T) {
	b := batchOf(i64col("id", []int64{1, 2, 3}, nil), i64col("x", []int64{4, 5, 6}, nil))
	p := compile(t, b, "", `- filter: "id != 2"`)
	st := p.NewState()
	_, err := st.Select(batchOf(i64col("x", []int64{1}, nil)), nil)
	wantErr(t, err, `ops: the batch has no column "id"`)
	// Select leaves its input alone.
	early := project(b, p.Early())
	before := slices.Clone(early.Columns[0].Data)
	sel, err := st.Select(early, nil)
	if err != nil || !slices.Equal(sel, []int32{0, 2}) || !slices.Equal(early.Columns[0].Data, before) {
		t.Fatalf("sel %v, err %v", sel, err)
	}
	// Apply takes over the columns that pass through, giving the batch the
	// output's old buffers.
	var late, out column.Batch
	late.Gather(project(b, p.Needs()), sel)
	data := &late.Columns[1].Data[0]
	if err := st.Apply(&late, &out); err != nil {
		t.Fatal(err)
	}
	if &out.Col("x").Data[0] != data {
		t.Error("x was copied, not moved")
	}
	if late.Columns[1].Len != 0 {
		t.Errorf("the consumed column still has %d rows", late.Columns[1].Len)
	}
}

// TestConcurrentStates runs one Program from several goroutines, a State
// each: with -race, it checks that workers share nothing writable.
func TestConcurrentStates(t *testing.T) {
	plan := smallPlan(t)
	p, err := ops.Compile(context.Background(), job(t, "", everyOp(t)...), plan.Fields, ops.Env{})
	if err != nil {
		t.Fatal(err)
	}
	var units []*column.Batch
	var want []*column.Batch
	for u := range plan.Units[:4] {
		b := decodeUnit(t, plan, u)
		units = append(units, b)
		out := run(t, p, b)
		want = append(want, out)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := newRunner(p)
			for k := range 3 * len(units) {
				u := (k + w) % len(units)
				out, err := r.run(units[u])
				if err == nil {
					err = sameBatch(want[u], out)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSelectNoRows(t *testing.T) {
	b := batchOf(i64col("id", []int64{1, 2, 3}, nil))
	for _, ops := range [][]string{nil, {`- filter: "id > 0"`}, {`- filter: "id > 0"`, `- sample: {key: id, rates: [{rate: 0.5}]}`}} {
		p := compile(t, b, "", ops...)
		sel, err := p.NewState().Select(project(b, p.Early()), []int32{})
		if err != nil || sel == nil || len(sel) != 0 {
			t.Errorf("%v: an empty preselection kept %v (%v)", ops, sel, err)
		}
	}
}

// TestPrunerWithJoin: a pipeline with joins answers Pruner with its side
// tables planned, never loaded, as Prune answers with them loaded.
func TestPrunerWithJoin(t *testing.T) {
	ints, _ := joinTables(t)
	b := batchOf(i64col("user", []int64{1, 2}, nil), i32col("label", []int32{0, 1}, nil))
	pipeline := []string{
		fmt.Sprintf("- join: {kind: left, table: %s, on: user, table_key: id, columns: [score]}", ints),
		`- filter: "label == 1 and score > 3"`,
	}
	stats := func(lo, hi float64) func(string) (expr.Range, bool) {
		return func(col string) (expr.Range, bool) {
			if col != "label" {
				return expr.Range{}, false
			}
			return expr.Range{Min: lo, Max: hi, HasBounds: true, NullCount: 0, Rows: 10}, true
		}
	}
	prune, err := ops.Pruner(context.Background(), job(t, "", pipeline...), fieldsOf(b), ops.Env{})
	if err != nil {
		t.Fatal(err)
	}
	p := compile(t, b, "", pipeline...)
	for _, r := range [][2]float64{{0, 0}, {0, 1}, {1, 1}} {
		if got, want := prune(stats(r[0], r[1])), p.Prune(stats(r[0], r[1])); got != want {
			t.Errorf("label in %v: Pruner says %v, Prune %v", r, got, want)
		}
	}
	if prune(stats(0, 0)) {
		t.Errorf("label in [0, 0]: a filter on label == 1 may keep a row")
	}
}
