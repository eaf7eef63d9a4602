package ops_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/datagen"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/ops"
	"github.com/lastmile/lastmile/spec"
)

var (
	exampleOnce sync.Once
	exampleDir  string
	exampleErr  error
	exampleYAML []byte
)

// exampleSetup lays out examples/ctr-8rank.yaml with its spam table where
// the spec expects it (../out/ctr-spam.parquet), in a directory shared by
// the tests of this run.
func exampleSetup(t testing.TB) string {
	t.Helper()
	exampleOnce.Do(func() {
		exampleYAML, exampleErr = os.ReadFile("../examples/ctr-8rank.yaml")
		if exampleErr != nil {
			return
		}
		exampleDir, exampleErr = os.MkdirTemp("", "ops-example-")
		if exampleErr != nil {
			return
		}
		if exampleErr = os.MkdirAll(filepath.Join(exampleDir, "examples"), 0o755); exampleErr != nil {
			return
		}
		exampleErr = datagen.WriteSpamUsers(context.Background(), filepath.Join(exampleDir, "out", "ctr-spam.parquet"),
			datagen.DefaultConfig(), datagen.DefaultSpamFraction)
	})
	if exampleErr != nil {
		t.Fatal(exampleErr)
	}
	return exampleDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range []string{exampleDir, bench.dir} {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}

// exampleJob parses the example spec, with edit applied to its text.
func exampleJob(t testing.TB, edit func(string) string) (*spec.Job, error) {
	dir := exampleSetup(t)
	src := string(exampleYAML)
	if edit != nil {
		src = edit(src)
	}
	return spec.Parse(filepath.Join(dir, "examples", "ctr-8rank.yaml"), []byte(src))
}

// smallPlan plans testdata/small, datagen's fixture (the default schema
// plus nullable columns).
func smallPlan(t testing.TB) *decode.Plan {
	t.Helper()
	p, err := decode.PlanFiles(context.Background(), []string{"../testdata/small"}, decode.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func decodeUnit(t testing.TB, plan *decode.Plan, u int) *column.Batch {
	t.Helper()
	d := decode.NewDecoder(plan.Fields)
	defer d.Close()
	b := new(column.Batch)
	if err := d.Decode(context.Background(), plan.Units[u], b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestExamplePipeline(t *testing.T) {
	j, err := exampleJob(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	plan := smallPlan(t)
	p, err := ops.Compile(context.Background(), j, plan.Fields, ops.Env{Seed: j.Seed})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Early(); !slices.Equal(got, []string{"row_id", "user_id", "label"}) {
		t.Errorf("early %v", got)
	}
	for _, c := range p.Needs() {
		if strings.HasSuffix(c, "_opt") || c == "cat_4" || c == "dense_opt" {
			t.Errorf("needs %s, which the pipeline never reads", c)
		}
	}
	var got []string
	for _, f := range p.Output() {
		got = append(got, f.Name)
	}
	want := []string{"label_f", "weight", "dense/dense_0", "dense/dense_1", "dense/dense_2", "dense/dense_3", "dense/dense_4",
		"dense/dense_5", "dense/dense_6", "dense/dense_7", "sparse/user_h", "sparse/item_h", "sparse/query_h", "sparse/cat_0",
		"sparse/cat_1", "sparse/cat_2", "sparse/cat_3", "sparse/history", "seq_0", "seq_0_len"}
	if !slices.Equal(got, want) {
		t.Errorf("output %v", got)
	}
	o := p.Output()
	if o[2] != (ops.OutField{Name: "dense/dense_0", Kind: column.Fixed, DType: column.Float32, Width: 1, Group: 1}) ||
		o[18] != (ops.OutField{Name: "seq_0", Kind: column.Fixed, DType: column.Int64, Width: 64}) ||
		o[17] != (ops.OutField{Name: "sparse/history", Kind: column.List, DType: column.Int64, Width: 1, Group: 2}) ||
		o[10] != (ops.OutField{Name: "sparse/user_h", Kind: column.Fixed, DType: column.Int64, Width: 1, Group: 2}) ||
		o[19].DType != column.Int32 || o[0].DType != column.Float32 || o[1].DType != column.Float32 {
		t.Errorf("output %+v", o)
	}
	if g := p.Groups(); len(g) != 2 || g[0].Name != "dense" || g[0].Kind != "stack" || g[1].Name != "sparse" ||
		len(g[1].Keys) != 8 || g[1].Keys[7] != "history" {
		t.Errorf("groups %+v", g)
	}
	in, kept := 0, 0
	for u := range plan.Units {
		b := decodeUnit(t, plan, u)
		out := run(t, p, b)
		in, kept = in+b.Rows, kept+out.Rows
		for _, w := range floats(t, out, "weight") {
			if w != 1 && float32(w) != 10 {
				t.Fatalf("weight %v", w)
			}
		}
		lens := ints(t, out, "seq_0_len")
		for _, n := range lens {
			if n < 0 || n > 64 {
				t.Fatalf("seq_0_len %d", n)
			}
		}
		for _, r := range lists(t, out, "sparse/history") {
			if len(r) > 256 {
				t.Fatalf("history row of %d", len(r))
			}
		}
	}
	// About 5% positives plus 10% of the negatives, less spam users' rows.
	if frac := float64(kept) / float64(in); frac < 0.10 || frac > 0.20 {
		t.Errorf("kept %d of %d rows (%.3f)", kept, in, frac)
	}
}

// TestCompileErrors checks the errors users see for mistakes in the
// example spec: the op's field and the line of the mistake.
func TestCompileErrors(t *testing.T) {
	plan := smallPlan(t)
	line := func(src, sub string) int { return strings.Count(src[:strings.Index(src, sub)], "\n") + 1 }
	cases := []struct {
		name      string
		old, new  string
		field     string
		lineOf    string // text on the reported line
		wantInMsg string
	}{
		{"map typo", `hash_mod(user_id, 1000003)`, `hash_mod(user_idd, 1000003)`, "pipeline[2].map.user_h", `user_h: "hash_mod(user_idd`,
			`unknown column "user_idd" (did you mean "user_id"?), at offset 9 of "hash_mod(user_idd, 1000003)"`},
		{"map type", `clip(log1p(abs(dense_0)), 0, 10)`, `clip(log1p(abs(query)), 0, 10)`, "pipeline[2].map.dense_0", `dense_0: "clip`, `abs`},
		{"sample key", `key: row_id`, `key: rowid`, "pipeline[1].sample.key", `- sample:`, `unknown column "rowid" (did you mean "row_id"?)`},
		{"sample when", `when: "label == 1"`, `when: "label = 1"`, "pipeline[1].sample.rates[0].when", `- sample:`, `at offset`},
		{"join key", `on: user_id,`, `on: userid,`, "pipeline[0].join.on", `- join:`, `unknown column "userid" (did you mean "user_id"?)`},
		{"join table", `../out/ctr-spam.parquet`, `../out/nope.parquet`, "pipeline[0].join.table", `- join:`, `nope.parquet`},
		{"join memory", `max_memory: 256MiB`, `max_memory: 64KiB`, "pipeline[0].join.max_memory", `- join:`, `over max_memory 65536 bytes; raise max_memory or filter the table`},
		{"sequence column", `{column: seq_0,`, `{column: seq_9,`, "pipeline[3].sequence.column", `- sequence: {column: seq_9`, `unknown column "seq_9"`},
		{"sequence of a scalar", `{column: seq_0,`, `{column: cat_0,`, "pipeline[3].sequence.column", `- sequence: {column: cat_0`, `column "cat_0" is int64; sequence shapes list columns`},
		{"select inputs next to derived columns", `[label_f, weight,`, `[label, label_f, weight, row_id, `, "", "", ""},
		{"select unknown", `seq_0, seq_0_len]`, `seq_0, seq_2]`, "pipeline[6].select[5]", `- select:`, `unknown column "seq_2"`},
		{"stack a list", `dense_6, dense_7]}`, `dense_6, seq_1]}`, "pipeline[4].stack.columns[7]", `- stack:`, `column "seq_1" is list<int64>; a stack takes numeric scalar columns`},
		{"drop every column", `- select: [label_f, weight, dense, sparse, seq_0, seq_0_len]`,
			"- select: [label_f, weight, dense, sparse, seq_0, seq_0_len]\n  - drop: [label_f, weight, dense, sparse, seq_0, seq_0_len]",
			"pipeline[7].drop", `- drop:`, `leaves no column: trainers would get batches without a tensor`},
		{"jagged float", `cat_2, {column: cat_3`, `label_f, {column: cat_3`, "pipeline[5].jagged.keys[5].column", `keys: [user_h`, `column "label_f" is float32; a jagged key takes`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var src string
			j, err := exampleJob(t, func(s string) string {
				if !strings.Contains(s, tc.old) {
					t.Fatalf("the example has no %q", tc.old)
				}
				src = strings.Replace(s, tc.old, tc.new, 1)
				return src
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = ops.Compile(context.Background(), j, plan.Fields, ops.Env{})
			if tc.field == "" {
				if err != nil {
					t.Fatalf("selecting input columns next to derived ones: %v", err)
				}
				return
			}
			fe, ok := err.(*spec.FieldError)
			if !ok {
				t.Fatalf("error %T %v, want a *spec.FieldError", err, err)
			}
			if fe.Field != tc.field || fe.Line != line(src, tc.lineOf) || !strings.Contains(fe.Msg, tc.wantInMsg) {
				t.Errorf("error %v\nwant field %s, line %d, message containing %q", err, tc.field, line(src, tc.lineOf), tc.wantInMsg)
			}
			if !strings.HasSuffix(fe.File, "ctr-8rank.yaml") {
				t.Errorf("file %q", fe.File)
			}
		})
	}
	t.Run("columns", func(t *testing.T) {
		j, err := exampleJob(t, func(s string) string {
			return strings.Replace(s, "pipeline:", "columns: [row_id, user_id, lable]\npipeline:", 1)
		})
		if err != nil {
			t.Fatal(err)
		}
		_, err = ops.Compile(context.Background(), j, plan.Fields, ops.Env{})
		wantErr(t, err, `columns[2]: unknown column "lable" in the input (did you mean "label"?)`)
		j, err = exampleJob(t, func(s string) string {
			return strings.Replace(s, "pipeline:", "columns: [row_id, user_id]\npipeline:", 1)
		})
		if err != nil {
			t.Fatal(err)
		}
		_, err = ops.Compile(context.Background(), j, plan.Fields, ops.Env{})
		wantErr(t, err, `pipeline[1].sample.rates[0].when: column "label" is in the input but not in the job's columns; add it there`)
	})
}
