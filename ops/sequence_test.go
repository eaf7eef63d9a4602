package ops_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/ops"
)

func seqBatch() *column.Batch {
	return batchOf(
		i64col("id", []int64{0, 1, 2, 3, 4}, nil),
		listcol("s", [][]int64{{1, 2, 3, 4, 5}, {6}, nil, {7, 8, 9}, {10, 11}}, []byte{1, 1, 0, 1, 1}),
	)
}

// fixedRows splits a [B, L] column into rows.
func fixedRows(t *testing.T, b *column.Batch, name string) [][]int64 {
	c := col(t, b, name)
	v := ints(t, b, name)
	var out [][]int64
	for i := range c.Len {
		out = append(out, v[i*c.Width:(i+1)*c.Width])
	}
	return out
}

func TestSequenceFixed(t *testing.T) {
	b := seqBatch()
	cases := []struct {
		name string
		op   string
		want [][]int64
		lens []int64
	}{
		{"defaults: keep the last, pad right", "- sequence: {column: s, length: 3, lengths: n}",
			[][]int64{{3, 4, 5}, {6, 0, 0}, {0, 0, 0}, {7, 8, 9}, {10, 11, 0}}, []int64{3, 1, 0, 3, 2}},
		{"truncate right", "- sequence: {column: s, length: 3, truncate: right, lengths: n}",
			[][]int64{{1, 2, 3}, {6, 0, 0}, {0, 0, 0}, {7, 8, 9}, {10, 11, 0}}, []int64{3, 1, 0, 3, 2}},
		{"pad left with -1", "- sequence: {column: s, length: 3, pad_side: left, pad_value: -1, lengths: n}",
			[][]int64{{3, 4, 5}, {-1, -1, 6}, {-1, -1, -1}, {7, 8, 9}, {-1, 10, 11}}, []int64{3, 1, 0, 3, 2}},
		{"truncate right, pad left", "- sequence: {column: s, length: 4, truncate: right, pad_side: left, lengths: n}",
			[][]int64{{1, 2, 3, 4}, {0, 0, 0, 6}, {0, 0, 0, 0}, {0, 7, 8, 9}, {0, 0, 10, 11}}, []int64{4, 1, 0, 3, 2}},
		{"longer than every row", "- sequence: {column: s, length: 6, pad_value: 9, lengths: n}",
			[][]int64{{1, 2, 3, 4, 5, 9}, {6, 9, 9, 9, 9, 9}, {9, 9, 9, 9, 9, 9}, {7, 8, 9, 9, 9, 9}, {10, 11, 9, 9, 9, 9}}, []int64{5, 1, 0, 3, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := compile(t, b, "", tc.op)
			out := run(t, p, b)
			if got := fixedRows(t, out, "s"); !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("rows %v, want %v", got, tc.want)
			}
			if got := ints(t, out, "n"); !slices.Equal(got, tc.lens) {
				t.Errorf("lengths %v, want %v", got, tc.lens)
			}
			if f := p.Output()[1]; f.Kind != column.Fixed || f.Width != col(t, out, "s").Width || f.Nullable {
				t.Errorf("field %+v", f)
			}
		})
	}
}

func TestSequenceRagged(t *testing.T) {
	b := seqBatch()
	cases := []struct {
		name string
		op   string
		want [][]int64
		ids  []int64
	}{
		{"no bound: nulls become empty", "- sequence: {column: s, length: 0}",
			[][]int64{{1, 2, 3, 4, 5}, {6}, {}, {7, 8, 9}, {10, 11}}, []int64{0, 1, 2, 3, 4}},
		{"max_length keeps the last", "- sequence: {column: s, length: 0, max_length: 2}",
			[][]int64{{4, 5}, {6}, {}, {8, 9}, {10, 11}}, []int64{0, 1, 2, 3, 4}},
		{"max_length truncate right", "- sequence: {column: s, length: 0, max_length: 2, truncate: right}",
			[][]int64{{1, 2}, {6}, {}, {7, 8}, {10, 11}}, []int64{0, 1, 2, 3, 4}},
		{"on_long skip", "- sequence: {column: s, length: 0, max_length: 3, on_long: skip}",
			[][]int64{{6}, {}, {7, 8, 9}, {10, 11}}, []int64{1, 2, 3, 4}},
		{"into another column", "- sequence: {column: s, length: 0, max_length: 1, output: t}",
			[][]int64{{5}, {6}, {}, {9}, {11}}, []int64{0, 1, 2, 3, 4}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := compile(t, b, "", tc.op)
			out := run(t, p, b)
			name := "s"
			if len(p.Output()) == 3 {
				name = "t"
			}
			got := lists(t, out, name)
			for i := range got {
				if got[i] == nil {
					got[i] = []int64{}
				}
			}
			if !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("rows %v, want %v", got, tc.want)
			}
			if got := ints(t, out, "id"); !slices.Equal(got, tc.ids) {
				t.Errorf("ids %v, want %v", got, tc.ids)
			}
		})
	}
}

func TestSequenceOnLong(t *testing.T) {
	b := seqBatch()
	p := compile(t, b, "", "- sequence: {column: s, length: 3, on_long: skip}")
	if got := ints(t, run(t, p, b), "id"); !slices.Equal(got, []int64{1, 2, 3, 4}) {
		t.Errorf("skip kept %v", got)
	}
	if len(p.Early()) != 0 {
		t.Errorf("on_long: skip of a column nothing else reads made it early: %v", p.Early())
	}
	// With the list early anyway (a filter reads it), the skip runs in
	// Select. len of the null row 2 is null, which the filter drops.
	p = compile(t, b, "", `- filter: "len(s) < 4"`, "- sequence: {column: s, length: 2, on_long: skip}")
	if got := p.String(); !strings.Contains(got, "select: pipeline[1].sequence") {
		t.Errorf("plan:\n%s", got)
	}
	if got := ints(t, run(t, p, b), "id"); !slices.Equal(got, []int64{1, 4}) {
		t.Errorf("filter + skip kept %v", got)
	}
	p = compile(t, b, "", "- sequence: {column: s, length: 3, on_long: error}")
	_, err := runErr(p, p.NewState(), b)
	wantErr(t, err, `pipeline[0].sequence (line 6): column "s": a row has 5 elements, over length 3 (on_long: error)`)
	var de *ops.DataError
	if !asDataError(err, &de) || de.Column != "s" {
		t.Errorf("%T %v", err, err)
	}
	// A row a filter drops is no error.
	p = compile(t, b, "", "- sequence: {column: s, length: 3, on_long: error}", `- filter: "id > 0"`)
	if got := ints(t, run(t, p, b), "id"); !slices.Equal(got, []int64{1, 2, 3, 4}) {
		t.Errorf("kept %v", got)
	}
}

func TestSequenceErrors(t *testing.T) {
	b := batchOf(i64col("id", []int64{1}, nil), listcol("s", [][]int64{{1}}, nil))
	b32 := batchOf(column.Column{Name: "s", Kind: column.List, DType: column.Int32, Width: 1, Len: 1, Offsets: []int64{0, 1}, Data: []byte{1, 0, 0, 0}})
	cases := []struct {
		b        *column.Batch
		op, want string
	}{
		{b, "- sequence: {column: ss, length: 3}", `pipeline[0].sequence.column: unknown column "ss" (did you mean "s"?)`},
		{b, "- sequence: {column: id, length: 3}", `pipeline[0].sequence.column: column "id" is int64; sequence shapes list columns`},
		{b, "- sequence: {column: s, length: 3, lengths: s}", `pipeline[0].sequence.lengths: the lengths column "s" has the sequence's own name`},
		{b32, "- sequence: {column: s, length: 3, pad_value: 3000000000}", `pipeline[0].sequence.pad_value: column "s": pad_value 3000000000 does not fit int32 (-2147483648 to 2147483647)`},
	}
	for _, tc := range cases {
		_, err := ops.Compile(context.Background(), job(t, "", tc.op), fieldsOf(tc.b), ops.Env{})
		wantErr(t, err, tc.want)
	}
}
