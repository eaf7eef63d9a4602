package ops_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/datagen"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/ops"
	"github.com/lastmile/lastmile/spec"
)

// Benchmarks run each op over one decoded unit of 131072 rows of datagen's
// default table (with its nullable columns): Select over every row, then
// Apply over the rows kept. Decoding and the engine's gather of the kept
// rows are outside the timing. SetBytes is the decoded input the program
// reads (its Needs columns).

const benchRows = 131072

var bench struct {
	once   sync.Once
	err    error
	dir    string
	fields []decode.Field
	b      *column.Batch
	side   string // a left-join table of user ids with a score
}

func benchSetup(b *testing.B) {
	bench.once.Do(func() {
		ctx := context.Background()
		dir, err := os.MkdirTemp("", "ops-bench-")
		if err != nil {
			bench.err = err
			return
		}
		bench.dir = dir
		cfg := datagen.DefaultConfig()
		cfg.Rows, cfg.RowGroupRows, cfg.Nullable = benchRows, benchRows, true
		if _, err := datagen.Write(ctx, filepath.Join(dir, "t"), cfg); err != nil {
			bench.err = err
			return
		}
		plan, err := decode.PlanFiles(ctx, []string{filepath.Join(dir, "t")}, decode.PlanOptions{})
		if err != nil {
			bench.err = err
			return
		}
		d := decode.NewDecoder(plan.Fields)
		defer d.Close()
		bench.b = new(column.Batch)
		if bench.err = d.Decode(ctx, plan.Units[0], bench.b); bench.err != nil {
			return
		}
		bench.fields = plan.Fields
		// Every 4th user of the million, with a score: 250k keys.
		type row struct {
			ID    int64   `parquet:"id"`
			Score float32 `parquet:"score"`
		}
		var rows []row
		for u := int64(0); u < datagen.Users; u += 4 {
			rows = append(rows, row{ID: u, Score: float32(u % 100)})
		}
		bench.side = filepath.Join(dir, "side.parquet")
		writeTable(b, bench.side, rows)
		bench.err = datagen.WriteSpamUsers(ctx, filepath.Join(dir, "spam.parquet"), datagen.DefaultConfig(), datagen.DefaultSpamFraction)
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
}

func benchProgram(b *testing.B, j *spec.Job) {
	p, err := ops.Compile(context.Background(), j, bench.fields, ops.Env{Seed: j.Seed})
	if err != nil {
		b.Fatal(err)
	}
	in := project(bench.b, p.Needs())
	early := project(bench.b, p.Early())
	st := p.NewState()
	sel, err := st.Select(early, nil)
	if err != nil {
		b.Fatal(err)
	}
	var kept, late, out column.Batch
	kept.Gather(in, sel)
	late.Gather(in, sel)
	b.SetBytes(int64(in.Bytes()))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		// Apply consumed late (moving its passthrough columns into out and
		// cutting rows in place): refill it, off the clock.
		b.StopTimer()
		for i := range late.Columns {
			c, k := &late.Columns[i], &kept.Columns[i]
			c.Name, c.Kind, c.DType, c.Width, c.Len = k.Name, k.Kind, k.DType, k.Width, k.Len
			c.Data = append(c.Data[:0], k.Data...)
			c.Offsets = append(c.Offsets[:0], k.Offsets...)
			c.Valid = nil
			if k.Valid != nil {
				c.Valid = append(c.Valid, k.Valid...)
			}
		}
		b.StartTimer()
		if _, err := st.Select(early, nil); err != nil {
			b.Fatal(err)
		}
		if err := st.Apply(&late, &out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(out.Rows)/float64(benchRows), "kept")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchRows, "ns/row")
}

func benchOps(b *testing.B, pipeline ...string) {
	benchSetup(b)
	j, err := parseJob(bench.dir, pipeline...)
	if err != nil {
		b.Fatal(err)
	}
	j.Seed = 20261121
	benchProgram(b, j)
}

func BenchmarkPassthrough(b *testing.B) {
	benchOps(b, "- select: [row_id, user_id, label, dense_0, dense_1, cat_0, cat_1, seq_0, query]")
}

func BenchmarkFilter(b *testing.B) {
	benchOps(b, `- filter: "label == 1 or dense_0 > 1.0"`, "- select: [row_id, dense_0]")
}

func BenchmarkSample(b *testing.B) {
	benchOps(b, `- sample: {key: row_id, rates: [{when: "label == 1", rate: 1.0}, {rate: 0.1}], weight: weight}`, "- select: [row_id, weight]")
}

func BenchmarkJoinAnti(b *testing.B) {
	benchOps(b, "- join: {kind: anti, table: spam.parquet, on: user_id}", "- select: [row_id]")
}

func BenchmarkJoinSemiString(b *testing.B) {
	benchSetup(b)
	path := filepath.Join(bench.dir, "queries.parquet")
	if _, err := os.Stat(path); err != nil {
		type row struct {
			Query string `parquet:"query"`
		}
		var rows []row
		q := bench.b.Col("query")
		seen := map[string]bool{}
		for i := 0; i < q.Len && len(rows) < 5000; i += 3 {
			if s := string(q.Row(i)); !seen[s] {
				seen[s] = true
				rows = append(rows, row{s})
			}
		}
		writeTable(b, path, rows)
	}
	benchOps(b, "- join: {kind: semi, table: queries.parquet, on: query}", "- select: [row_id]")
}

func BenchmarkJoinLeft(b *testing.B) {
	benchOps(b, "- join: {kind: left, table: side.parquet, on: user_id, table_key: id, columns: [score]}", "- select: [row_id, score]")
}

func BenchmarkMap(b *testing.B) {
	benchOps(b, `- map: {user_h: "hash_mod(user_id, 1000003)", query_h: "hash_mod(query, 65536)", dense_0: "clip(log1p(abs(dense_0)), 0, 10)", label_f: "cast(label, float32)"}`,
		"- select: [user_h, query_h, dense_0, label_f]")
}

func BenchmarkCast(b *testing.B) {
	benchOps(b, "- cast: {dense_0: bfloat16, dense_1: bfloat16, dense_2: bfloat16, dense_3: bfloat16, seq_0: int32}",
		"- select: [dense_0, dense_1, dense_2, dense_3, seq_0]")
}

func BenchmarkSequenceFixed(b *testing.B) {
	benchOps(b, "- sequence: {column: seq_0, length: 64, truncate: left, pad_side: right, lengths: seq_0_len}", "- select: [seq_0, seq_0_len]")
}

func BenchmarkSequenceRagged(b *testing.B) {
	benchOps(b, "- sequence: {column: seq_1, length: 0, max_length: 256}", "- select: [seq_1]")
}

func BenchmarkSequenceSkip(b *testing.B) {
	benchOps(b, "- sequence: {column: seq_0, length: 64, on_long: skip}", "- select: [seq_0]")
}

func BenchmarkNulls(b *testing.B) {
	for _, policy := range []string{"fill", "skip"} {
		b.Run(policy, func(b *testing.B) {
			benchOps(b, fmt.Sprintf("- nulls: {policy: %s, columns: [dense_opt, cat_opt, query_opt], fill: -1}", policy),
				"- select: [dense_opt, cat_opt, query_opt]")
		})
	}
}

// BenchmarkExamplePipeline runs examples/ctr-8rank.yaml's ops.
func BenchmarkExamplePipeline(b *testing.B) {
	benchSetup(b)
	j, err := exampleJob(b, nil)
	if err != nil {
		b.Fatal(err)
	}
	benchProgram(b, j)
}
