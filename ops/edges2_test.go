package ops_test

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/column"
)

func TestOrderAndChecks(t *testing.T) {
	b := batchOf(
		i64col("id", []int64{0, 1, 2, 3}, nil),
		i64col("a", []int64{1, 2, 3, 4}, nil),
		i64col("c", []int64{10, 20, 30, 40}, nil),
		listcol("s", [][]int64{{1, 2, 3, 4, 5}, {6}, nil, {7}}, []byte{1, 1, 0, 1}),
		i64col("opt", []int64{1, 0, 3, 4}, []byte{1, 0, 1, 1}),
	)
	// map swap
	p := compile(t, b, "", `- map: {a: "c", c: "a"}`)
	out := run(t, p, b)
	if !slices.Equal(ints(t, out, "a"), []int64{10, 20, 30, 40}) || !slices.Equal(ints(t, out, "c"), []int64{1, 2, 3, 4}) {
		t.Errorf("swap: %v %v", ints(t, out, "a"), ints(t, out, "c"))
	}
	// filter before map sees the old value, after sees the new
	p = compile(t, b, "", `- filter: "a > 2"`, `- map: {a: "a * 10"}`, `- filter: "a < 40"`)
	if got := ints(t, run(t, p, b), "id"); !slices.Equal(got, []int64{2}) {
		t.Errorf("order: kept %v, want [2]", got)
	}
	// on_long: error counts only rows that are output (a later filter drops row 0)
	p = compile(t, b, "", "- sequence: {column: s, length: 2, on_long: error}", `- filter: "id != 0"`)
	if _, err := runErr(p, p.NewState(), b); err != nil {
		t.Errorf("on_long error on a row a later filter drops: %v", err)
	}
	// nulls: error counts only rows that are output
	p = compile(t, b, "", "- nulls: {policy: error, columns: [opt]}", `- filter: "id != 1"`)
	if _, err := runErr(p, p.NewState(), b); err != nil {
		t.Errorf("nulls error on a row a later filter drops: %v", err)
	}
	// nulls skip of a late column and a filter: drops commute
	p = compile(t, b, "", "- nulls: {policy: skip, columns: [opt]}", `- map: {z: "opt * 2"}`, `- filter: "z > 2"`)
	out = run(t, p, b)
	if got := ints(t, out, "id"); !slices.Equal(got, []int64{2, 3}) {
		t.Errorf("nulls skip + map + filter kept %v", got)
	}
	if c := col(t, out, "z"); c.Valid != nil {
		t.Errorf("z nullable after nulls op")
	}
	// sample after a filter after a map over a late column
	p = compile(t, b, "", `- map: {k: "a + c"}`, `- filter: "k > 11"`, "- sample: {key: k, rates: [{when: 'k > 30', rate: 0.0001}]}")
	out = run(t, p, b)
	got := ints(t, out, "id")
	if !slices.Contains(got, 1) || slices.Contains(got, 0) {
		t.Errorf("map/filter/sample kept %v", got)
	}
}

func TestStackConversions(t *testing.T) {
	b := batchOf(
		i64col("a", []int64{1<<60 + 1<<36 + 1, math.MaxInt64, -1}, nil),
		f64col("d", []float64{1 + math.Pow(2, -24), 1 + 3*math.Pow(2, -24), math.NaN()}, nil),
		f32col("x", []float32{1.00390625, 1.01171875, float32(math.Copysign(0, -1))}, []byte{1, 1, 0}),
	)
	p := compile(t, b, "", "- stack: {output: dense, columns: [a, d, x], nulls: fill, fill: 0.1}")
	out := run(t, p, b)
	if got := floats(t, out, "dense/a"); !slices.Equal(got, []float64{float64(float32(1<<60 + 1<<37)), float64(float32(math.MaxInt64)), -1}) {
		t.Errorf("stack a: %v", got)
	}
	gd := floats(t, out, "dense/d")
	if gd[0] != 1 || gd[1] != float64(float32(1+4*math.Pow(2, -24))) || !math.IsNaN(gd[2]) {
		t.Errorf("stack d: %v", gd)
	}
	if got := floats(t, out, "dense/x"); !slices.Equal(got, []float64{1.00390625, 1.01171875, float64(float32(0.1))}) {
		t.Errorf("stack x: %v", got)
	}
	p = compile(t, b, "", "- stack: {output: dense, columns: [a, x], dtype: bfloat16, nulls: fill, fill: 0.1}")
	out = run(t, p, b)
	c := col(t, out, "dense/x")
	var bits []uint16
	for i := range c.Len {
		bits = append(bits, binary.LittleEndian.Uint16(c.Data[2*i:]))
	}
	if !slices.Equal(bits, []uint16{0x3f80, 0x3f82, 0x3dcd}) {
		t.Errorf("stack bf16 x bits %x", bits)
	}
}

func TestCastListAndNulls(t *testing.T) {
	b := batchOf(
		listcol("s", [][]int64{{1, math.MaxInt64}, {-1}}, nil),
		f64col("d", []float64{0, math.NaN()}, []byte{0, 1}),
		i32col("n", []int32{0, 5}, []byte{0, 1}),
	)
	p := compile(t, b, "", "- cast: {s: int32}")
	out := run(t, p, b)
	_ = out
	if got := lists32(t, out, "s"); !slices.EqualFunc(got, [][]int64{{1, -1}, {-1}}, slices.Equal) {
		t.Errorf("list cast int64->int32 (integers wrap): %v", got)
	}
	p = compile(t, b, "", "- nulls: {policy: fill, columns: [d, n], fill: -1}")
	out = run(t, p, b)
	if got := floats(t, out, "d"); got[0] != -1 || !math.IsNaN(got[1]) {
		t.Errorf("nulls fill d %v", got)
	}
	if got := ints(t, out, "n"); !slices.Equal(got, []int64{-1, 5}) {
		t.Errorf("nulls fill n %v", got)
	}
}

func lists32(t *testing.T, b *column.Batch, name string) [][]int64 {
	c := col(t, b, name)
	var out [][]int64
	for i := range c.Len {
		var r []int64
		for j := c.Offsets[i]; j < c.Offsets[i+1]; j++ {
			if c.DType == column.Int32 {
				r = append(r, int64(int32(binary.LittleEndian.Uint32(c.Data[4*j:]))))
			} else {
				r = append(r, int64(binary.LittleEndian.Uint64(c.Data[8*j:])))
			}
		}
		out = append(out, r)
	}
	return out
}

func TestJaggedInt32Negative(t *testing.T) {
	b := batchOf(i32col("c", []int32{-1, math.MinInt32, 7}, nil))
	p := compile(t, b, "", "- jagged: {output: sp, keys: [{column: c, hash_mod: 1000003}]}")
	out := run(t, p, b)
	g := p.Groups()
	name := "sp/" + g[0].Keys[0]
	want := []int64{hashMod(-1, 1000003), hashMod(math.MinInt32, 1000003), hashMod(7, 1000003)}
	if got := ints(t, out, name); !slices.Equal(got, want) {
		t.Errorf("jagged int32 hash %v, want %v", got, want)
	}
	p = compile(t, b, "", `- map: {h: "hash_mod(c, 1000003)"}`)
	if got := ints(t, run(t, p, b), "h"); !slices.Equal(got, want) {
		t.Errorf("map int32 hash %v, want %v", got, want)
	}
}
