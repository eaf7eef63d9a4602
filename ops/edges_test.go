package ops_test

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/expr"
)

func rvSplitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func rvKeep(h, seed uint64, rate float64) bool {
	if rate >= 1 {
		return true
	}
	return rvSplitmix(seed^h) < uint64(rate*(1<<64))
}

func TestSampleReference(t *testing.T) {
	var ids []int64
	var ids32 []int32
	var valid []byte
	for i := range 4000 {
		v := int64(i*2654435761) - 1<<40
		if i%3 == 0 {
			v = -int64(i)
		}
		if i == 1 {
			v = math.MinInt64
		}
		if i == 2 {
			v = math.MaxInt64
		}
		ids = append(ids, v)
		ids32 = append(ids32, int32(v))
		vb := byte(1)
		if i%11 == 5 {
			vb = 0
		}
		valid = append(valid, vb)
	}
	b := batchOf(i64col("id", ids, valid), i32col("id32", ids32, valid), i64col("row", func() []int64 {
		r := make([]int64, len(ids))
		for i := range r {
			r[i] = int64(i)
		}
		return r
	}(), nil))
	for _, rate := range []float64{0.5, 0.3, 0.9999999999999999, 1e-3, 0.7} {
		for _, key := range []string{"id", "id32"} {
			p := compile(t, b, "", fmt.Sprintf("- sample: {key: %s, seed: 20261121, rates: [{when: 'row %% 2 == 0', rate: %v}], weight: w}", key, rate))
			out := run(t, p, b)
			var want []int64
			for i := range ids {
				if i%2 != 0 {
					want = append(want, int64(i))
					continue
				}
				v := ids[i]
				if key == "id32" {
					v = int64(ids32[i])
				}
				if valid[i] == 0 {
					v = 0
				}
				if rvKeep(expr.HashInt(v), 20261121, rate) {
					want = append(want, int64(i))
				}
			}
			got := ints(t, out, "row")
			if !slices.Equal(got, want) {
				t.Errorf("key %s rate %v: kept %d rows, want %d", key, rate, len(got), len(want))
			}
			w := floats(t, out, "w")
			for j, r := range got {
				ww := float32(1)
				if r%2 == 0 {
					ww = float32(1 / rate)
				}
				if float32(w[j]) != ww {
					t.Errorf("rate %v: weight %v, want %v", rate, w[j], ww)
					break
				}
			}
		}
	}
	// string key, null = ""
	sv := []string{"alice", "", "x", "héllo wörld", string(make([]byte, 10000))}
	sb := batchOf(strcol("s", sv, []byte{1, 0, 1, 1, 1}), i64col("row", []int64{0, 1, 2, 3, 4}, nil))
	p := compile(t, sb, "", "- sample: {key: s, seed: 7, rates: [{rate: 0.5}]}")
	var want []int64
	for i, s := range sv {
		if i == 1 {
			s = ""
		}
		if rvKeep(expr.HashBytes([]byte(s)), 7, 0.5) {
			want = append(want, int64(i))
		}
	}
	if got := ints(t, run(t, p, sb), "row"); !slices.Equal(got, want) {
		t.Errorf("string key kept %v, want %v", got, want)
	}
}

type rvNullKeyRow struct {
	ID  *int64 `parquet:"id,optional"`
	Val int64  `parquet:"val"`
}

type rvI32Row struct {
	ID  int32  `parquet:"id"`
	Tag string `parquet:"tag"`
}

type rvStrRow struct {
	K   string `parquet:"k"`
	Val int64  `parquet:"val"`
}

func TestJoinEdges(t *testing.T) {
	dir := t.TempDir()
	nk := filepath.Join(dir, "nk.parquet")
	writeTable(t, nk, []rvNullKeyRow{{ID: nil, Val: 1}, {ID: ptr[int64](0), Val: 2}, {ID: nil, Val: 3}, {ID: ptr[int64](math.MinInt64), Val: 4}})
	b := batchOf(
		i64col("user", []int64{0, 0, math.MinInt64, 5, math.MaxInt64}, []byte{1, 0, 1, 1, 1}),
		i64col("row", []int64{0, 1, 2, 3, 4}, nil),
	)
	// Two null table keys are ignored, not duplicates; a null row key matches nothing
	p := compile(t, b, "", fmt.Sprintf("- join: {kind: left, table: %s, on: user, table_key: id, columns: [val]}", nk))
	out := run(t, p, b)
	if got, v := ints(t, out, "val"), valid(t, out, "val"); !slices.Equal(got, []int64{2, 0, 4, 0, 0}) || !slices.Equal(v, []byte{1, 0, 1, 0, 0}) {
		t.Errorf("left join with null keys: val %v valid %v", got, v)
	}
	// filter after a left join: null compares false
	p = compile(t, b, "", fmt.Sprintf("- join: {kind: left, table: %s, on: user, table_key: id, columns: [val]}", nk), `- filter: "val != 2"`)
	if got := ints(t, run(t, p, b), "row"); !slices.Equal(got, []int64{2}) {
		t.Errorf("filter after left join kept %v, want [2]", got)
	}
	p = compile(t, b, "", fmt.Sprintf("- join: {kind: left, table: %s, on: user, table_key: id, columns: [val]}", nk), `- filter: "is_null(val)"`)
	if got := ints(t, run(t, p, b), "row"); !slices.Equal(got, []int64{1, 3, 4}) {
		t.Errorf("filter is_null after left join kept %v, want [1 3 4]", got)
	}
	for _, kind := range []string{"semi", "anti"} {
		p = compile(t, b, "", fmt.Sprintf("- join: {kind: %s, table: %s, on: user, table_key: id}", kind, nk))
		want := []int64{0, 2}
		if kind == "anti" {
			want = []int64{1, 3, 4}
		}
		if got := ints(t, run(t, p, b), "row"); !slices.Equal(got, want) {
			t.Errorf("%s with null keys kept %v, want %v", kind, got, want)
		}
	}
	// int32 table key against int64 rows: negatives sign-extended; values beyond int32 match nothing
	t32 := filepath.Join(dir, "t32.parquet")
	writeTable(t, t32, []rvI32Row{{ID: -1, Tag: "m1"}, {ID: math.MinInt32, Tag: "min"}, {ID: 7, Tag: "seven"}})
	b2 := batchOf(
		i64col("user", []int64{-1, 4294967295, math.MinInt32, 7, 7 + 1<<32}, nil),
		i64col("row", []int64{0, 1, 2, 3, 4}, nil),
	)
	p = compile(t, b2, "", fmt.Sprintf("- join: {kind: left, table: %s, on: user, table_key: id, columns: [tag]}", t32))
	out = run(t, p, b2)
	if got := strs(t, out, "tag"); !slices.Equal(got, []string{"m1", "", "min", "seven", ""}) {
		t.Errorf("int32 table key: tags %q", got)
	}
	p = compile(t, b2, "", fmt.Sprintf("- join: {kind: semi, table: %s, on: user, table_key: id}", t32))
	if got := ints(t, run(t, p, b2), "row"); !slices.Equal(got, []int64{0, 2, 3}) {
		t.Errorf("int32 table key semi: %v", got)
	}
	// string keys: unicode, empty, long, prefix-equal
	long := string(make([]byte, 5000)) + "x"
	ts := filepath.Join(dir, "ts.parquet")
	writeTable(t, ts, []rvStrRow{{K: "é", Val: 1}, {K: "", Val: 2}, {K: long, Val: 3}, {K: "ab", Val: 4}})
	b3 := batchOf(strcol("k", []string{"é", "e", "", long, long[:5000], "a", "ab", "abc"}, nil), i64col("row", []int64{0, 1, 2, 3, 4, 5, 6, 7}, nil))
	p = compile(t, b3, "", fmt.Sprintf("- join: {kind: left, table: %s, on: k, columns: [val]}", ts))
	out = run(t, p, b3)
	if got, v := ints(t, out, "val"), valid(t, out, "val"); !slices.Equal(got, []int64{1, 0, 2, 3, 0, 0, 4, 0}) || !slices.Equal(v, []byte{1, 0, 1, 1, 0, 0, 1, 0}) {
		t.Errorf("string left join: %v %v", got, v)
	}
}

func TestSequenceEdges(t *testing.T) {
	b := batchOf(
		i64col("id", []int64{0, 1, 2, 3}, nil),
		listcol("s", [][]int64{{1, 2, 3, 4, 5}, {}, nil, {math.MinInt64, math.MaxInt64}}, []byte{1, 1, 0, 1}),
	)
	p := compile(t, b, "", "- sequence: {column: s, length: 0, max_length: 2, truncate: left, lengths: n}")
	out := run(t, p, b)
	if got := lists(t, out, "s"); !slices.EqualFunc(got, [][]int64{{4, 5}, {}, {}, {math.MinInt64, math.MaxInt64}}, slices.Equal) {
		t.Errorf("ragged left: %v", got)
	}
	if got := ints(t, out, "n"); !slices.Equal(got, []int64{2, 0, 0, 2}) {
		t.Errorf("ragged lengths %v", got)
	}
	p = compile(t, b, "", "- sequence: {column: s, length: 0, max_length: 2, truncate: right}")
	if got := lists(t, run(t, p, b), "s"); !slices.EqualFunc(got, [][]int64{{1, 2}, {}, {}, {math.MinInt64, math.MaxInt64}}, slices.Equal) {
		t.Errorf("ragged right: %v", got)
	}
	p = compile(t, b, "", "- sequence: {column: s, length: 2, on_long: skip, output: o, lengths: n}")
	out = run(t, p, b)
	if got := ints(t, out, "id"); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Errorf("skip kept %v", got)
	}
	if got := fixedRows(t, out, "o"); !slices.EqualFunc(got, [][]int64{{0, 0}, {0, 0}, {math.MinInt64, math.MaxInt64}}, slices.Equal) {
		t.Errorf("skip rows %v", got)
	}
	// length 1
	p = compile(t, b, "", "- sequence: {column: s, length: 1, pad_side: left, pad_value: -7, lengths: n}")
	out = run(t, p, b)
	if got := fixedRows(t, out, "s"); !slices.EqualFunc(got, [][]int64{{5}, {-7}, {-7}, {math.MaxInt64}}, slices.Equal) {
		t.Errorf("length 1: %v", got)
	}
	if got := ints(t, out, "n"); !slices.Equal(got, []int64{1, 0, 0, 1}) {
		t.Errorf("length 1 lengths %v", got)
	}
	_ = column.Int64
}

func TestCastOpEdges(t *testing.T) {
	nan := float32(math.NaN())
	b := batchOf(
		f32col("x", []float32{nan, float32(math.Copysign(0, -1)), 2.9, -2.9, 2147483648, -2147483648, float32(math.Inf(-1))}, nil),
		i64col("a", []int64{1<<60 + 1<<36 + 1, math.MaxInt64, math.MinInt64, -1, 1<<24 + 1, 0, 3}, nil),
	)
	p := compile(t, b, "", "- cast: {x: int32, a: float32}")
	out := run(t, p, b)
	if got, v := ints(t, out, "x"), valid(t, out, "x"); !slices.Equal(got, []int64{0, 0, 2, -2, 0, -2147483648, 0}) || !slices.Equal(v, []byte{0, 1, 1, 1, 0, 1, 0}) {
		t.Errorf("cast x int32: %v %v", got, v)
	}
	want := []float64{float64(float32(1<<60 + 1<<37)), float64(float32(math.MaxInt64)), float64(float32(math.MinInt64)), -1, float64(float32(1 << 24)), 0, 3}
	if got := floats(t, out, "a"); !slices.Equal(got, want) {
		t.Errorf("cast a float32: %v, want %v", got, want)
	}
}
