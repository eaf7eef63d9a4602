package ops_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
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
			if !fieldErrors(err) {
				t.Fatalf("Compile error %T %v, want a *spec.FieldError or spec.Errors", err, err)
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

// fieldErrors reports whether err is what Compile promises for a bad
// spec: one *spec.FieldError, or several as spec.Errors, each naming its
// field.
func fieldErrors(err error) bool {
	switch e := err.(type) {
	case *spec.FieldError:
		return true
	case spec.Errors:
		return len(e) > 1 && !slices.Contains(e, nil)
	}
	return false
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

// FuzzPipeline builds pipelines from op templates and columns chosen by
// the fuzzer's bytes, so that most inputs compile and run, and checks that
// running them never panics and that the output matches the schema.
func FuzzPipeline(f *testing.F) {
	plan := smallPlan(f)
	b := slice(decodeUnit(f, plan, 0), 0, 200)
	cols := []string{"row_id", "user_id", "label", "dense_0", "dense_opt", "cat_0", "cat_opt", "seq_0", "seq_opt", "query", "query_opt", "x", "y"}
	templates := []string{
		`- filter: "%[1]s > %[3]d or is_null(%[2]s)"`,
		`- filter: "not is_null(%[1]s)"`,
		`- sample: {key: %[1]s, rates: [{when: "is_null(%[2]s)", rate: 0.5}, {rate: 0.%[3]d1}], weight: w%[3]d}`,
		`- map: {x: "hash_mod(%[1]s, %[3]d1)", y: "fill_null(%[2]s, %[3]d)"}`,
		`- map: {%[1]s: "cast(%[2]s, bfloat16)"}`,
		`- cast: {%[1]s: int32, %[2]s: float64}`,
		`- nulls: {policy: fill, fill: %[3]d}`,
		`- nulls: {policy: skip, columns: [%[1]s]}`,
		`- nulls: {policy: error, columns: [%[1]s]}`,
		`- sequence: {column: %[1]s, length: %[3]d, truncate: right, pad_side: left, pad_value: -%[3]d, lengths: n%[3]d}`,
		`- sequence: {column: %[1]s, length: 0, max_length: %[3]d, on_long: skip, output: %[2]s}`,
		`- sequence: {column: %[1]s, length: %[3]d, on_long: error}`,
		`- select: [%[1]s, %[2]s]`,
		`- rename: {%[1]s: %[2]s}`,
		`- drop: [%[1]s]`,
		`- stack: {output: g%[3]d, columns: [%[1]s, %[2]s], nulls: fill, fill: %[3]d}`,
		`- jagged: {output: k%[3]d, nulls: fill, keys: [%[1]s, {column: %[2]s, key: b, max_length: %[3]d, hash_mod: 9%[3]d}]}`,
	}
	for _, seed := range []string{"\x00\x01\x02\x03", "\x09\x07\x08\x02\x03\x04\x06\x01\x00\x05", "\x0a\x08\x00\x0b\x02\x04\x03\x01"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var lines []string
		for i := 0; i+3 < len(data) && len(lines) < 12; i += 4 {
			tpl := templates[int(data[i])%len(templates)]
			lines = append(lines, fmt.Sprintf(tpl, cols[int(data[i+1])%len(cols)], cols[int(data[i+2])%len(cols)], int(data[i+3])%70))
		}
		j, err := parseJob("", lines...)
		if err != nil {
			return
		}
		p, err := ops.Compile(context.Background(), j, plan.Fields, ops.Env{Seed: 1})
		if err != nil {
			if !fieldErrors(err) {
				t.Fatalf("Compile error %T %v", err, err)
			}
			return
		}
		r, halves := newRunner(p), newRunner(p)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf(format+"\n%s", append(args, strings.Join(lines, "\n"))...)
		}
		for range 2 {
			out, err := r.run(b)
			if err != nil {
				if _, ok := err.(*ops.DataError); !ok {
					fail("run: %T %v", err, err)
				}
				continue
			}
			if err := checkSchema(p, out); err != nil {
				fail("%v", err)
			}
			// The same rows, cut in two units.
			want := slice(out, 0, out.Rows)
			var cat column.Batch
			for _, part := range [][2]int{{0, 77}, {77, b.Rows}} {
				h, err := halves.run(slice(b, part[0], part[1]))
				if err != nil {
					return // a data error in one part
				}
				if h.Rows > 0 {
					cat.AppendRows(h, 0, h.Rows)
				}
			}
			if want.Rows == 0 && cat.Rows == 0 {
				continue
			}
			if err := sameBatch(want, &cat); err != nil {
				fail("whole vs halves: %v", err)
			}
		}
	})
}
