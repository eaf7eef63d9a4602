package ops_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/ops"
	"github.com/lastmile/lastmile/spec"
)

// FuzzCompile feeds fuzzed pipelines through spec.Parse and Compile, and
// runs what compiles over a slice of testdata/small: nothing may panic.
// "TABLE" in a pipeline stands for a side table keyed by id.
func FuzzCompile(f *testing.F) {
	plan := smallPlan(f)
	b := slice(decodeUnit(f, plan, 0), 0, 300)
	table := filepath.Join(f.TempDir(), "side.parquet")
	var rows []intRow
	for i := range int64(500) {
		rows = append(rows, intRow{ID: i * 3, Score: ptr(i), Tag: "t"})
	}
	writeTable(f, table, rows)

	example, err := os.ReadFile("../examples/ctr-8rank.yaml")
	if err != nil {
		f.Fatal(err)
	}
	pipe := string(example[strings.Index(string(example), "pipeline:\n")+len("pipeline:\n"):])
	f.Add(strings.ReplaceAll(pipe, "../out/ctr-spam.parquet", "TABLE"))
	for _, ops := range [][]string{everyOpTemplate(), {
		`- filter: "label == 1 and starts_with(query, 'a')"`,
		`- map: {x: "if(is_null(dense_opt), 0.0, dense_opt)", y: "bucketize(dense_0, [0, 1, 2])"}`,
		"- cast: {x: bfloat16, seq_opt: float32}",
		"- nulls: {policy: error}",
	}, {
		"- sequence: {column: seq_opt, length: 0, max_length: 3, on_long: error}",
		"- select: [seq_opt, row_id]",
		"- rename: {row_id: id}",
	}} {
		f.Add(strings.Join(ops, "\n") + "\n")
	}
	f.Fuzz(func(t *testing.T, pipeline string) {
		src := "version: 1\ninputs: [x]\nbatch: {size: 8}\npipeline:\n" + strings.ReplaceAll(pipeline, "TABLE", table)
		j, err := spec.Parse("fuzz.yaml", []byte(src))
		if err != nil {
			return
		}
		for _, op := range j.Pipeline {
			if op.Join != nil && op.Join.Table != table || op.Sequence != nil && (op.Sequence.Length > 4096 || op.Sequence.MaxLength > 1<<20) {
				return // no walking the file system, no huge tensors
			}
		}
		p, err := ops.Compile(context.Background(), j, plan.Fields, ops.Env{Seed: 1})
		if err != nil {
			if _, ok := err.(*spec.FieldError); !ok {
				t.Fatalf("Compile error %T %v, want a *spec.FieldError", err, err)
			}
			return
		}
		r := newRunner(p)
		for range 2 {
			if _, err := r.run(b); err != nil {
				if _, ok := err.(*ops.DataError); !ok {
					t.Fatalf("run: %T %v", err, err)
				}
			}
		}
	})
}

// everyOpTemplate is everyOp's pipeline with "TABLE" for both tables.
func everyOpTemplate() []string {
	return []string{
		"- join: {kind: anti, table: TABLE, on: user_id, table_key: id}",
		"- join: {kind: left, table: TABLE, on: user_id, table_key: id, columns: [score, tag]}",
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
