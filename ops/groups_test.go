package ops_test

import (
	"context"
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/expr"
	"github.com/lastmile/lastmile/ops"
)

func groupBatch() *column.Batch {
	return batchOf(
		i64col("id", []int64{0, 1, 2, 3}, nil),
		f32col("d0", []float32{1.5, 2, 0, -1}, []byte{1, 1, 0, 1}),
		i32col("d1", []int32{10, 20, 30, 40}, nil),
		i64col("cat", []int64{7, 0, 9, 5}, []byte{1, 0, 1, 1}),
		listcol("seq", [][]int64{{1, 2, 3}, nil, {4}, {5, 6, 7, 8}}, []byte{1, 0, 1, 1}),
		strcol("q", []string{"a", "bc", "", "a"}, nil),
	)
}

func hashMod(v, m int64) int64        { return int64(expr.HashInt(v) % uint64(m)) }
func hashStr(s string, m int64) int64 { return int64(expr.HashBytes([]byte(s)) % uint64(m)) }

// TestStackMembers checks what a stack leaves for the packer: its members
// in order, converted to the stack's dtype, nulls filled, the columns
// gone from the schema and the group described by Groups.
func TestStackMembers(t *testing.T) {
	b := groupBatch()
	cases := []struct {
		op      string
		dtype   column.DType
		members []string
		want    [][]float64
	}{
		{"- stack: {output: dense, columns: [d1, d0], nulls: fill, fill: 0.25}", column.Float32, []string{"d1", "d0"},
			[][]float64{{10, 20, 30, 40}, {1.5, 2, 0.25, -1}}},
		{"- stack: {output: dense, columns: [d1, id, cat], dtype: int64, nulls: fill}", column.Int64, []string{"d1", "id", "cat"},
			[][]float64{{10, 20, 30, 40}, {0, 1, 2, 3}, {7, 0, 9, 5}}},
	}
	for _, tc := range cases {
		p := compile(t, b, "", tc.op)
		out := run(t, p, b)
		if g := p.Groups(); len(g) != 1 || g[0].Name != "dense" || g[0].Kind != "stack" || g[0].DType != tc.dtype {
			t.Fatalf("%s: groups %+v", tc.op, g)
		}
		o := p.Output()
		for j, m := range tc.members {
			c := col(t, out, "dense/"+m)
			f := o[slices.Index(names(out), "dense/"+m)]
			if f.Group != 1 || c.DType != tc.dtype || c.Valid != nil {
				t.Errorf("%s: member %s is %v group %d", tc.op, m, c.DType, f.Group)
			}
			var got []float64
			if tc.dtype == column.Int64 {
				for _, v := range ints(t, out, "dense/"+m) {
					got = append(got, float64(v))
				}
			} else {
				got = floats(t, out, "dense/"+m)
			}
			if !slices.Equal(got, tc.want[j]) {
				t.Errorf("%s: member %s %v, want %v", tc.op, m, got, tc.want[j])
			}
			if slices.Contains(names(out), m) {
				t.Errorf("%s: %s still in the output %v", tc.op, m, names(out))
			}
		}
	}
}

// TestJaggedMembers checks the members of a jagged group, key by key:
// scalars, lists, truncation, hashing, strings, nulls.
func TestJaggedMembers(t *testing.T) {
	b := groupBatch()
	cases := []struct {
		name  string
		key   string
		list  [][]int64 // a list member
		ids   []int64   // a scalar member
		valid []byte
	}{
		{"scalar as is", "cat", nil, []int64{7, 0, 9, 5}, []byte{1, 0, 1, 1}},
		{"scalar hashed", "{column: cat, hash_mod: 100}", nil, []int64{hashMod(7, 100), hashMod(0, 100), hashMod(9, 100), hashMod(5, 100)}, []byte{1, 0, 1, 1}},
		{"int32 scalar widened", "d1", nil, []int64{10, 20, 30, 40}, nil},
		{"list as is", "seq", [][]int64{{1, 2, 3}, {}, {4}, {5, 6, 7, 8}}, nil, nil},
		{"list keeps the last 2", "{column: seq, max_length: 2}", [][]int64{{2, 3}, {}, {4}, {7, 8}}, nil, nil},
		{"list keeps the first 2, hashed", "{column: seq, max_length: 2, truncate: right, hash_mod: 10}",
			[][]int64{{hashMod(1, 10), hashMod(2, 10)}, {}, {hashMod(4, 10)}, {hashMod(5, 10), hashMod(6, 10)}}, nil, nil},
		{"string hashed", "{column: q, hash_mod: 1000}", nil, []int64{hashStr("a", 1000), hashStr("bc", 1000), hashStr("", 1000), hashStr("a", 1000)}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := compile(t, b, "", "- jagged: {output: sparse, nulls: fill, keys: ["+tc.key+"]}")
			out := run(t, p, b)
			g := p.Groups()
			if len(g) != 1 || g[0].Kind != "jagged" || len(g[0].Keys) != 1 {
				t.Fatalf("groups %+v", g)
			}
			name := "sparse/" + g[0].Keys[0]
			if tc.list != nil {
				if got := lists(t, out, name); !slices.EqualFunc(got, tc.list, slices.Equal) {
					t.Errorf("rows %v, want %v", got, tc.list)
				}
				return
			}
			c := col(t, out, name)
			got := ints(t, out, name)
			for i := range got {
				if tc.valid != nil && tc.valid[i] == 0 {
					got[i] = 0
				}
			}
			want := slices.Clone(tc.ids)
			for i := range want {
				if tc.valid != nil && tc.valid[i] == 0 {
					want[i] = 0
				}
			}
			if c.Kind != column.Fixed || c.DType != column.Int64 || !slices.Equal(got, want) || !slices.Equal(c.Valid, tc.valid) {
				t.Errorf("%v %v ids %v valid %v, want %v %v", c.Kind, c.DType, got, c.Valid, want, tc.valid)
			}
		})
	}
}

// TestGroupNullsError checks nulls: error, the default, on both groups:
// a null in a row that is output fails naming the column.
func TestGroupNullsError(t *testing.T) {
	b := groupBatch()
	for _, op := range []string{
		"- stack: {output: dense, columns: [d1, d0]}",
		"- jagged: {output: sparse, keys: [seq, cat]}",
	} {
		p := compile(t, b, "", op)
		_, err := runErr(p, p.NewState(), b)
		var de *ops.DataError
		if !asDataError(err, &de) || de.Line != 6 {
			t.Errorf("%s: error %v, want a DataError at line 6", op, err)
		}
		// Without the null rows the same op passes.
		p = compile(t, b, "", "- filter: \"id != 1 and id != 2\"", op)
		if _, err := runErr(p, p.NewState(), b); err != nil {
			t.Errorf("%s without null rows: %v", op, err)
		}
	}
}

func TestGroupCompileErrors(t *testing.T) {
	b := groupBatch()
	cases := []struct{ name, op, want string }{
		{"stack a list", "- stack: {output: x, columns: [d0, seq]}", `job.yaml:6: pipeline[0].stack.columns[1]: column "seq" is list<int64>; a stack takes numeric scalar columns`},
		{"stack a string", "- stack: {output: x, columns: [q]}", `pipeline[0].stack.columns[0]: column "q" is string`},
		{"int64 stack of floats", "- stack: {output: x, columns: [d0], dtype: int64}", `column "d0" is float32; a stack of dtype int64 takes integer columns`},
		{"stack unknown", "- stack: {output: x, columns: [d9]}", `pipeline[0].stack.columns[0]: unknown column "d9" (did you mean "d0"?)`},
		{"stack fill", "- stack: {output: x, columns: [cat], nulls: fill, fill: 0.5}", `pipeline[0].stack.fill: column "cat"`},
		{"jagged float", "- jagged: {output: s, keys: [d0]}", `pipeline[0].jagged.keys[0].column: column "d0" is float32; a jagged key takes a list or scalar column of integer ids`},
		{"jagged string", "- jagged: {output: s, keys: [id, q]}", `pipeline[0].jagged.keys[1].hash_mod: column "q" is a string; a jagged key holds integer ids: give it hash_mod`},
		{"jagged unknown", "- jagged: {output: s, keys: [{column: sq}]}", `pipeline[0].jagged.keys[0].column: unknown column "sq" (did you mean "seq"?)`},
		{"member used after", "- stack: {output: x, columns: [d0]}\n  - filter: \"d0 > 1\"", `column "d0" was put into the stack group "x" at line 6`},
		{"group cast", "- jagged: {output: s, keys: [seq]}\n  - cast: {s: int32}", `column "s" is the jagged group made at line 6; no op can read a group`},
		{"stack cast", "- stack: {output: x, columns: [d0, d1]}\n  - cast: {x: bfloat16}", `column "x" is the stack group made at line 6; no op can read a group`},
		{"stack in a stack", "- stack: {output: x, columns: [d0, d1]}\n  - stack: {output: y, columns: [x]}", `column "x" is the stack group made at line 6`},
		{"group sequence", "- jagged: {output: s, keys: [seq]}\n  - sequence: {column: s, length: 4}", `column "s" is the jagged group made at line 6`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ops.Compile(context.Background(), job(t, "", tc.op), fieldsOf(b), ops.Env{})
			wantErr(t, err, tc.want)
		})
	}
}

// TestGroupRenameSelect checks that a group moves and renames like a
// column: its members follow it.
func TestGroupRenameSelect(t *testing.T) {
	b := groupBatch()
	p := compile(t, b, "", "- jagged: {output: s, nulls: fill, keys: [cat, seq]}", "- rename: {s: sparse}", "- select: [sparse, id]")
	out := run(t, p, b)
	if got := names(out); !slices.Equal(got, []string{"sparse/cat", "sparse/seq", "id"}) {
		t.Errorf("columns %v", got)
	}
	if g := p.Groups(); len(g) != 1 || g[0].Name != "sparse" || !slices.Equal(g[0].Keys, []string{"cat", "seq"}) {
		t.Errorf("groups %+v", g)
	}
}

// flistcol is a list<float32> column.
func flistcol(name string, rows [][]float32) column.Column {
	c := column.Column{Name: name, Kind: column.List, DType: column.Float32, Width: 1, Len: len(rows), Offsets: []int64{0}}
	for _, r := range rows {
		for _, v := range r {
			c.Data = binary.LittleEndian.AppendUint32(c.Data, math.Float32bits(v))
		}
		c.Offsets = append(c.Offsets, c.Offsets[len(c.Offsets)-1]+int64(len(r)))
	}
	return c
}

// TestJaggedWeights: a key's weights column is cut as its ids are, row by
// row, so the two stay lined up for a weighted KeyedJaggedTensor; a row
// whose weights are not as many as its ids fails with a DataError, and
// weights that cannot line up with ids are refused when compiling.
func TestJaggedWeights(t *testing.T) {
	b := groupBatch() // seq: {1, 2, 3}, null, {4}, {5, 6, 7, 8}
	b.Columns = append(b.Columns, flistcol("w", [][]float32{{.1, .2, .3}, nil, {.4}, {.5, .6, .7, .8}}),
		flistcol("short", [][]float32{{.1, .2, .3}, nil, {}, {.5, .6, .7, .8}}))
	for _, tc := range []struct {
		name string
		key  string
		want [][]float32
	}{
		{"no cut", "{column: seq, weights: w}", [][]float32{{.1, .2, .3}, {}, {.4}, {.5, .6, .7, .8}}},
		{"the last 2", "{column: seq, max_length: 2, weights: w}", [][]float32{{.2, .3}, {}, {.4}, {.7, .8}}},
		{"the first 2, hashed ids", "{column: seq, max_length: 2, truncate: right, hash_mod: 10, weights: w}", [][]float32{{.1, .2}, {}, {.4}, {.5, .6}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := compile(t, b, "", "- jagged: {output: sparse, nulls: fill, keys: ["+tc.key+"]}")
			out := run(t, p, b)
			c := col(t, out, "w")
			var got [][]float32
			for i := range c.Len {
				got = append(got, slices.Clone(c.Float32s()[c.Offsets[i]:c.Offsets[i+1]]))
			}
			if c.Kind != column.List || c.DType != column.Float32 || !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("weights %v %v %v, want %v", c.Kind, c.DType, got, tc.want)
			}
			ids := lists(t, out, "sparse/seq")
			for i := range ids {
				if len(ids[i]) != len(got[i]) {
					t.Errorf("row %d: %d ids, %d weights", i, len(ids[i]), len(got[i]))
				}
			}
		})
	}
	// The group carries the weights: a member after its keys, float32.
	p := compile(t, b, "", "- jagged: {output: sparse, nulls: fill, keys: [cat, {column: seq, max_length: 2, weights: w}]}")
	if g := p.Groups(); len(g) != 1 || !slices.Equal(g[0].Weights, []int{-1, 2}) {
		t.Fatalf("groups %+v, want key 1 weighed by member 2", g)
	}
	out := run(t, p, b)
	m := col(t, out, "sparse/seq#weights")
	if m.Kind != column.List || m.DType != column.Float32 || !slices.Equal(m.Float32s(), []float32{.2, .3, .4, .7, .8}) {
		t.Errorf("weights member %v %v %v, want the cut weights", m.Kind, m.DType, m.Float32s())
	}
	// A scalar key's weights: a scalar column, as float32.
	p = compile(t, b, "", "- jagged: {output: sparse, nulls: fill, keys: [{column: cat, weights: d1}]}")
	if g := p.Groups(); len(g) != 1 || !slices.Equal(g[0].Weights, []int{1}) {
		t.Fatalf("groups %+v, want key 0 weighed by member 1", g)
	}
	if m := col(t, run(t, p, b), "sparse/cat#weights"); m.Kind != column.Fixed || !slices.Equal(m.Float32s(), []float32{10, 20, 30, 40}) {
		t.Errorf("scalar weights member %v %v, want d1 as float32", m.Kind, m.Float32s())
	}
	p = compile(t, b, "", "- jagged: {output: sparse, nulls: fill, keys: [{column: seq, weights: short}]}")
	_, err := runErr(p, p.NewState(), b)
	var de *ops.DataError
	if !asDataError(err, &de) || !strings.Contains(err.Error(), `a row has 0 weights where its key "seq" has 1 ids`) {
		t.Errorf("weights shorter than the ids: %v", err)
	}
	for _, tc := range []struct{ name, key, want string }{
		{"a scalar key, list weights", "{column: cat, weights: w}", `keys[0].weights: column "w" is list<float32>; the weights of a scalar key (one id a row) are a scalar column of numbers`},
		{"weights not a list", "{column: seq, weights: d0}", `keys[0].weights: column "d0" is float32; weights are a list of numbers`},
		{"unknown weights", "{column: seq, weights: ww}", `keys[0].weights: unknown column "ww" (did you mean "w"?)`},
	} {
		_, err := ops.Compile(context.Background(), job(t, "", "- jagged: {output: s, keys: ["+tc.key+"]}"), fieldsOf(b), ops.Env{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
