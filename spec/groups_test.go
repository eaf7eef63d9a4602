package spec_test

import (
	"strings"
	"testing"

	"github.com/lastmile/lastmile/spec"
)

func TestGroupsParse(t *testing.T) {
	src := `inputs: [a]
batch: {size: 8}
pipeline:
  - stack: {output: dense, columns: [d0, d1], dtype: bfloat16, nulls: fill, fill: -1}
  - jagged:
      output: sparse
      keys:
        - cat_0
        - {column: seq_0, key: seq, max_length: 64, truncate: right, hash_mod: 1000}
`
	j, err := spec.Parse("g.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	s := j.Pipeline[0].Stack
	if s.Output != "dense" || len(s.Columns) != 2 || s.DType != "bfloat16" || s.Nulls != "fill" || s.Fill != spec.Num(-1) {
		t.Errorf("stack %+v", s)
	}
	g := j.Pipeline[1].Jagged
	want := []spec.JaggedKey{
		{Column: "cat_0", Key: "cat_0", Truncate: "left", Line: 8},
		{Column: "seq_0", Key: "seq", MaxLength: 64, Truncate: "right", HashMod: 1000, Line: 9},
	}
	if g.Output != "sparse" || g.Nulls != "error" || len(g.Keys) != 2 || g.Keys[0] != want[0] || g.Keys[1] != want[1] {
		t.Errorf("jagged %+v, want keys %+v", g, want)
	}
	d, err := spec.Parse("g.yaml", []byte("inputs: [a]\nbatch: {size: 8}\npipeline:\n  - stack: {output: x, columns: [a]}\n"))
	if err != nil || d.Pipeline[0].Stack.DType != "float32" || d.Pipeline[0].Stack.Nulls != "error" {
		t.Errorf("stack defaults: %v %+v", err, d.Pipeline[0].Stack)
	}
}

func TestGroupErrors(t *testing.T) {
	base := "inputs: [a]\nbatch: {size: 8}\npipeline:\n"
	cases := []struct{ name, ops, want string }{
		{"stack output", "  - stack: {columns: [a]}\n", "4: pipeline[0].stack.output: required"},
		{"stack no columns", "  - stack: {output: d, columns: []}\n", "pipeline[0].stack.columns: want 1 to 4096 numeric columns"},
		{"stack twice", "  - stack: {output: d, columns: [a, b, a]}\n", `pipeline[0].stack.columns[2]: column "a" listed twice`},
		{"stack dtype", "  - stack: {output: d, columns: [a], dtype: float64}\n", `pipeline[0].stack.dtype: want float32, bfloat16 or int64, got "float64"`},
		{"stack nulls", "  - stack: {output: d, columns: [a], nulls: skip}\n", `pipeline[0].stack.nulls: want error or fill, got "skip" (to drop rows`},
		{"stack field", "  - stack: {output: d, columns: [a], width: 3}\n", "pipeline[0].stack.width: unknown field (allowed: output, columns, dtype, nulls, fill)"},
		{"jagged keys", "  - jagged: {output: s}\n", "pipeline[0].jagged.keys: want 1 to 4096 keys"},
		{"jagged dup", "  - jagged:\n      output: s\n      keys:\n        - a\n        - {column: b, key: a}\n", `8: pipeline[0].jagged.keys[1].key: key "a" is also keys[0]`},
		{"jagged dup scalar", "  - jagged:\n      output: s\n      keys:\n        - a\n        - a\n", `8: pipeline[0].jagged.keys[1].key: key "a" is also keys[0]`},
		{"jagged column", "  - jagged: {output: s, keys: [{key: x}]}\n", "pipeline[0].jagged.keys[0].column: required"},
		{"jagged max", "  - jagged: {output: s, keys: [{column: a, max_length: -1}]}\n", "pipeline[0].jagged.keys[0].max_length: want 0 (no bound) or more, got -1"},
		{"jagged trunc", "  - jagged: {output: s, keys: [{column: a, truncate: middle}]}\n", `pipeline[0].jagged.keys[0].truncate: want left (keep the last elements) or right, got "middle"`},
		{"jagged hash", "  - jagged: {output: s, keys: [{column: a, hash_mod: -5}]}\n", "pipeline[0].jagged.keys[0].hash_mod: want 0 (no hashing) or a modulus >= 1, got -5"},
		{"jagged long key", "  - jagged: {output: s, keys: [" + strings.Repeat("k", 64) + "]}\n", "is longer than 63 bytes (the ring's limit)"},
		{"jagged key field", "  - jagged: {output: s, keys: [{column: a, hash: 5}]}\n", "pipeline[0].jagged.keys[0].hash: unknown field (allowed: column, key, max_length, truncate, hash_mod, weights)"},
		{"jagged weights own ids", "  - jagged: {output: s, keys: [{column: a, weights: a}]}\n", `pipeline[0].jagged.keys[0].weights: column "a" is the key's own ids`},
		{"jagged weights twice", "  - jagged: {output: s, keys: [{column: a, weights: w}, {column: b, weights: w}]}\n", `pipeline[0].jagged.keys[1].weights: column "w" also weighs keys[0]`},
		{"jagged nulls", "  - jagged: {output: s, keys: [a], nulls: drop}\n", `pipeline[0].jagged.nulls: want error or fill, got "drop"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := spec.Parse("p.yaml", []byte(base+tc.ops))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}
