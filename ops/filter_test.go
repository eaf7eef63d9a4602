package ops_test

import (
	"slices"
	"testing"
)

func TestEmptyPipeline(t *testing.T) {
	b := batchOf(
		i64col("id", []int64{1, 2, 3}, nil),
		strcol("s", []string{"a", "", "c"}, []byte{1, 0, 1}),
	)
	p := compile(t, b, "")
	if got := p.Needs(); !slices.Equal(got, []string{"id", "s"}) {
		t.Errorf("needs %v", got)
	}
	if got := p.Early(); len(got) != 0 {
		t.Errorf("early %v", got)
	}
	out := run(t, p, b)
	if got := ints(t, out, "id"); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Errorf("id %v", got)
	}
	if got := valid(t, out, "s"); !slices.Equal(got, []byte{1, 0, 1}) {
		t.Errorf("s validity %v", got)
	}
}

func TestFilter(t *testing.T) {
	b := batchOf(
		i64col("id", []int64{1, 2, 3, 4, 5, 6}, nil),
		i32col("label", []int32{1, 0, 1, 0, 0, 1}, []byte{1, 1, 1, 1, 1, 0}),
		strcol("q", []string{"ab", "b", "abc", "x", "", "a"}, nil),
		f32col("x", []float32{0.5, 1, 2, 3, 4, 5}, nil),
	)
	cases := []struct {
		name     string
		pipeline []string
		want     []int64
		early    []string
	}{
		{"eq", []string{`- filter: "label == 1"`}, []int64{1, 3}, []string{"label"}},
		{"null is false", []string{`- filter: "label != 1"`}, []int64{2, 4, 5}, []string{"label"}},
		{"strings", []string{`- filter: "starts_with(q, 'a')"`}, []int64{1, 3, 6}, []string{"q"}},
		{"two filters", []string{`- filter: "id > 1"`, `- filter: "x < 4"`}, []int64{2, 3, 4}, []string{"id", "x"}},
		{"after a map", []string{`- map: {y: "x * 2"}`, `- filter: "y >= 4"`}, []int64{3, 4, 5, 6}, []string{"x"}},
		{"after a rename", []string{`- rename: {x: z}`, `- filter: "z >= 4"`}, []int64{5, 6}, []string{"x"}},
		{"is_null", []string{`- filter: "is_null(label)"`}, []int64{6}, []string{"label"}},
		{"none", []string{`- filter: "id > 100"`}, nil, []string{"id"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := compile(t, b, "", tc.pipeline...)
			if got := p.Early(); !slices.Equal(got, tc.early) {
				t.Errorf("early %v, want %v", got, tc.early)
			}
			out := run(t, p, b)
			if got := ints(t, out, "id"); !slices.Equal(got, tc.want) {
				t.Errorf("ids %v, want %v\n%s", got, tc.want, p)
			}
		})
	}
}
