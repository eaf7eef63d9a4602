package expr_test

import (
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/expr"
)

var fuzzSeeds = []string{
	"label == 1 or (user_id % 10 == 0 and not is_null(cat_opt))",
	`query == "foo" or starts_with(query, 'ab')`,
	"cat_0 in (3, 17, 42)",
	"dense_0 * 2.5 - dense_1 >= 0.1",
	"clip(log1p(dense_0), 0, 10)",
	"bucketize(dense_1, [0.1, 0.5, 1, 5])",
	"hash_mod(user_id, 1000003)",
	"hash_mod(query, 65536)",
	"fill_null(cat_opt, -1)",
	"cast(label, float32)",
	"if(label == 1, 1.0, 0.0)",
	"cast(dense_0, bfloat16)",
	"len(seq_0) > 3 and `weird name` != -9223372036854775808",
	`"a\"b\n\xff\u00e9" not in ["x", 'y',]`,
	"- -1e-3 / .5 % 2.",
	"min(max(label, user_id), 3, -dense_0)",
	"if(flag_opt, query_opt, null)",
	"ctx.geo.lat > 0.5 and `user.age` != user_id",
	`user_id >= timestamp("2025-11-20T06:00:00+01:00") and user_id < timestamp("2025-11-27", "us")`,
	`timestamp("1970-01-01T00:00:00.0000005Z") < id_opt or id_opt in [timestamp("1969-12-31T23:59:59.999999Z")]`,
}

// FuzzParse checks that Parse never panics and that what it accepts
// prints (String) as source that parses to the same tree.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		n, err := expr.Parse(src)
		if err != nil {
			if e, ok := err.(*expr.Error); !ok || e.Pos < 0 || e.Pos > len(src) {
				t.Fatalf("Parse(%q): error %#v", src, err)
			}
			return
		}
		s := n.String()
		n2, err := expr.Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q, which does not parse: %v", src, s, err)
		}
		if s2 := n2.String(); s2 != s {
			t.Fatalf("round trip of %q: %q then %q", src, s, s2)
		}
	})
}

// FuzzEval checks that compiling any text never panics, and that what
// compiles evaluates and filters a small batch with nulls without a panic.
func FuzzEval(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	valid := []byte{1, 0, 1, 1}
	b := batch(
		ints("label", column.Int32, []int64{1, 0, -2147483648, 7}, nil),
		ints("user_id", column.Int64, []int64{-9223372036854775808, 10, 0, -1}, nil),
		floats("dense_0", column.Float32, []float64{0.5, -1, 1e30, 0}, nil),
		floats("dense_1", column.Float32, []float64{0.5, 0, -3, 2}, valid),
		floats("d64", column.Float64, []float64{1, 2, 3, 4}, nil),
		ints("cat_0", column.Int32, []int64{3, 17, 42, 0}, nil),
		ints("cat_opt", column.Int32, []int64{0, 0, 2, 0}, valid),
		ints("id_opt", column.Int64, []int64{5, 0, -5, 0}, valid),
		strs("query", []string{"foo", "", "abc", "\xff"}, nil),
		strs("query_opt", []string{"a", "", "ab", "b"}, valid),
		column.Column{Name: "seq_0", Kind: column.List, DType: column.Int64, Len: 4, Offsets: []int64{0, 1, 1, 3, 3}, Data: make([]byte, 24), Valid: valid},
		ints("flag", column.Bool, []int64{1, 0, 1, 0}, nil),
		ints("flag_opt", column.Bool, []int64{1, 0, 0, 1}, valid),
		ints("weird name", column.Int64, []int64{1, 2, 3, 4}, nil),
	)
	f.Fuzz(func(t *testing.T, src string) {
		e, err := expr.Compile(src, schema)
		if err != nil {
			return
		}
		var out column.Column
		if err := e.Eval(b, &out); err != nil {
			t.Fatalf("Eval(%q): %v", src, err)
		}
		if err := out.Check(); err != nil {
			t.Fatalf("Eval(%q): %v", src, err)
		}
		if e.Type().Kind == expr.Bool {
			if _, err := e.Filter(b, nil); err != nil {
				t.Fatalf("Filter(%q): %v", src, err)
			}
		}
		e.MayMatch(func(string) (expr.Range, bool) { return expr.Range{Min: -1, Max: 1, HasBounds: true, Rows: 4}, true })
	})
}
