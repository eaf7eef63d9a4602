package ops_test

import (
	"context"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/ops"
)

func TestProject(t *testing.T) {
	b := batchOf(
		i64col("a", []int64{1, 2}, nil),
		i64col("b", []int64{3, 4}, nil),
		strcol("c", []string{"x", "y"}, nil),
		listcol("d", [][]int64{{1}, {2, 3}}, nil),
	)
	cases := []struct {
		name  string
		ops   []string
		cols  []string
		needs []string
	}{
		{"select reorders", []string{"- select: [c, a]"}, []string{"c", "a"}, []string{"a", "c"}},
		{"drop", []string{"- drop: [b, d]"}, []string{"a", "c"}, []string{"a", "c"}},
		{"rename swaps", []string{"- rename: {a: b, b: a}"}, []string{"b", "a", "c", "d"}, []string{"a", "b", "c", "d"}},
		{"rename then select", []string{"- rename: {d: seq}", "- select: [seq]"}, []string{"seq"}, []string{"d"}},
		{"map of a dropped input", []string{`- map: {e: "a + b"}`, "- select: [e]"}, []string{"e"}, []string{"a", "b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := compile(t, b, "", tc.ops...)
			out := run(t, p, b)
			if got := names(out); !slices.Equal(got, tc.cols) {
				t.Errorf("columns %v, want %v", got, tc.cols)
			}
			if got := p.Needs(); !slices.Equal(got, tc.needs) {
				t.Errorf("needs %v, want %v", got, tc.needs)
			}
		})
	}
	t.Run("values follow renames", func(t *testing.T) {
		p := compile(t, b, "", "- rename: {a: b, b: a}")
		out := run(t, p, b)
		if got := ints(t, out, "b"); !slices.Equal(got, []int64{1, 2}) {
			t.Errorf("b %v", got)
		}
	})
	t.Run("a column output twice is copied", func(t *testing.T) {
		p := compile(t, b, "", "- sequence: {column: d, length: 0, output: e}")
		out := run(t, p, b)
		if !slices.EqualFunc(lists(t, out, "d"), lists(t, out, "e"), slices.Equal) {
			t.Errorf("d %v, e %v", lists(t, out, "d"), lists(t, out, "e"))
		}
		if &col(t, out, "d").Data[0] == &col(t, out, "e").Data[0] {
			t.Error("d and e share memory")
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			ops  []string
			want string
		}{
			{[]string{"- select: [a, bb]"}, `6: pipeline[0].select[1]: unknown column "bb" (did you mean "b"?)`},
			{[]string{"- select: [a, a]"}, `pipeline[0].select[1]: column "a" listed twice`},
			{[]string{"- drop: [z]"}, `pipeline[0].drop[0]: unknown column "z"`},
			{[]string{"- rename: {a: b}"}, `pipeline[0].rename.a: column "b" exists already`},
			{[]string{"- rename: {a: x, b: x}"}, `pipeline[0].rename.b: two columns renamed to "x"`},
			{[]string{"- drop: [a]", `- filter: "a > 1"`}, `7: pipeline[1].filter: column "a" was dropped at line 6`},
			{[]string{"- select: [b]", "- drop: [a]"}, `pipeline[1].drop[0]: column "a" was left out by the select at line 6`},
			{[]string{"- rename: {a: z}", "- select: [a]"}, `pipeline[1].select[0]: column "a" was renamed to "z" at line 6`},
		} {
			_, err := ops.Compile(context.Background(), job(t, "", tc.ops...), fieldsOf(b), ops.Env{})
			wantErr(t, err, tc.want)
		}
	})
}

func TestColumnNames(t *testing.T) {
	b := batchOf(i64col("a", []int64{1}, nil), listcol("s", [][]int64{{1}}, nil))
	for _, tc := range []struct{ op, want string }{
		{`- map: {"": "a"}`, `pipeline[0].map: want a column name of 1 to 255 printable characters, got ""`},
		{`- map: {"x\ty": "a"}`, `want a column name of 1 to 255 printable characters, got "x\ty"`},
		{`- rename: {a: ""}`, `pipeline[0].rename.a: want a column name`},
		{`- sequence: {column: s, length: 2, lengths: "\n"}`, `pipeline[0].sequence.lengths: want a column name`},
		{`- sample: {key: a, rates: [{rate: 0.5}], weight: "\u0001"}`, `pipeline[0].sample.weight: want a column name`},
	} {
		_, err := ops.Compile(context.Background(), job(t, "", tc.op), fieldsOf(b), ops.Env{})
		wantErr(t, err, tc.want)
	}
}
