package expr_test

import (
	"math/rand/v2"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/expr"
)

const benchRows = 131072

// benchBatch is a recommender-like batch: label 1 in about 10% of rows,
// random ids, dense features in [-1, 10), cat_opt null in 20% of rows,
// queries of 5 to 20 bytes.
func benchBatch(n int) *column.Batch {
	rng := rand.New(rand.NewPCG(1, 1))
	label, uid, cat, opt := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	d0, d1 := make([]float64, n), make([]float64, n)
	valid := make([]byte, n)
	q := make([]string, n)
	for i := range n {
		if rng.IntN(10) == 0 {
			label[i] = 1
		}
		uid[i] = rng.Int64N(1 << 40)
		cat[i] = rng.Int64N(100)
		opt[i] = rng.Int64N(100)
		if rng.IntN(5) != 0 {
			valid[i] = 1
		}
		d0[i], d1[i] = rng.Float64()*11-1, rng.Float64()*11-1
		buf := make([]byte, 5+rng.IntN(16))
		for j := range buf {
			buf[j] = byte('a' + rng.IntN(26))
		}
		q[i] = string(buf)
	}
	return batch(
		ints("label", column.Int32, label, nil),
		ints("user_id", column.Int64, uid, nil),
		ints("cat_0", column.Int32, cat, nil),
		ints("cat_opt", column.Int32, opt, valid),
		floats("dense_0", column.Float32, d0, nil),
		floats("dense_1", column.Float32, d1, nil),
		strs("query", q, nil),
	)
}

// inputBytes is what an expression reads per batch: the data (and
// offsets, validity) of the columns it uses.
func inputBytes(b *column.Batch, e *expr.Expr) int64 {
	n := 0
	for _, name := range e.Columns() {
		c := b.Col(name)
		n += len(c.Data) + 8*len(c.Offsets) + len(c.Valid)
	}
	return int64(n)
}

func BenchmarkFilter(b *testing.B) {
	bt := benchBatch(benchRows)
	for _, src := range []string{
		"label == 1",
		"label == 1 or user_id % 10 == 0",
		"label == 1 and user_id % 10 == 0",
		"label == 1 or (user_id % 10 == 0 and not is_null(cat_opt))",
		"dense_0 * 2.5 - dense_1 >= 0.1",
		"cat_0 in (3, 17, 42)",
		`query == "foo" or starts_with(query, "ab")`,
	} {
		b.Run(src, func(b *testing.B) {
			e, err := expr.Compile(src, expr.BatchSchema(bt))
			if err != nil {
				b.Fatal(err)
			}
			sel := make([]int32, 0, benchRows)
			b.SetBytes(inputBytes(bt, e))
			b.ReportAllocs()
			for b.Loop() {
				if sel, err = e.Filter(bt, sel); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrows/s")
			b.ReportMetric(float64(len(sel))/benchRows, "selected")
		})
	}
}

func BenchmarkEval(b *testing.B) {
	bt := benchBatch(benchRows)
	for _, src := range []string{
		"clip(log1p(dense_0), 0, 10)",
		"hash_mod(query, 65536)",
		"hash_mod(user_id, 1000003)",
		"user_id % 10",
		"dense_0 * 2.5 - dense_1",
		"bucketize(dense_0, [0.1, 0.5, 1, 5])",
		"fill_null(cat_opt, -1)",
		"cast(label, float32)",
		"if(label == 1, 1.0, 0.0)",
		"cast(dense_0, bfloat16)",
	} {
		b.Run(src, func(b *testing.B) {
			e, err := expr.Compile(src, expr.BatchSchema(bt))
			if err != nil {
				b.Fatal(err)
			}
			var out column.Column
			b.SetBytes(inputBytes(bt, e))
			b.ReportAllocs()
			for b.Loop() {
				if err := e.Eval(bt, &out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrows/s")
		})
	}
}

func BenchmarkCompile(b *testing.B) {
	s := expr.BatchSchema(benchBatch(benchRows))
	src := "label == 1 or (user_id % 10 == 0 and not is_null(cat_opt)) or clip(log1p(dense_0), 0, 10) > 2.5"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := expr.Compile(src, s); err != nil {
			b.Fatal(err)
		}
	}
}
