package expr_test

import (
	"github.com/lastmile/lastmile/expr"
	"math"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/column"
)

func TestEdgeExpr(t *testing.T) {
	nan := math.NaN()
	b := batch(
		ints("a", column.Int64, []int64{math.MinInt64, math.MaxInt64, -1, 0, 1 << 60}, nil),
		ints("i", column.Int32, []int64{math.MinInt32, math.MaxInt32, -1, 0, 2}, nil),
		ints("n", column.Int32, []int64{1, 0, 2, 0, 3}, []byte{1, 0, 1, 0, 1}),
		floats("x", column.Float32, []float64{nan, -0.0, 1, 2.5, math.Inf(1)}, nil),
		floats("d", column.Float64, []float64{nan, 2147483647.9, -2147483648.9, 2147483648, -9.3e18}, nil),
		strs("s", []string{"héllo", "", "B", "a", "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"}, nil),
	)
	// comparisons with null are false, != included
	checkInts(t, b, "n != 1", []int64{0, 0, 1, 0, 1}, nil)
	checkInts(t, b, "not (n == 1)", []int64{0, 1, 1, 1, 1}, nil)
	checkInts(t, b, "n not in (1)", []int64{0, 0, 1, 0, 1}, nil)
	checkInts(t, b, "n in (1, 3000000000, 2.5)", []int64{1, 0, 0, 0, 0}, nil)
	checkInts(t, b, "n not in (3000000000)", []int64{1, 0, 1, 0, 1}, nil)
	// NaN comparisons
	checkInts(t, b, "x == x", []int64{0, 1, 1, 1, 1}, nil)
	checkInts(t, b, "x != x", []int64{1, 0, 0, 0, 0}, nil)
	checkInts(t, b, "x < 2", []int64{0, 1, 1, 0, 0}, nil)
	checkInts(t, b, "not (x < 2)", []int64{1, 0, 0, 1, 1}, nil)
	checkInts(t, b, "x >= 2", []int64{0, 0, 0, 1, 1}, nil)
	checkInts(t, b, "x in (1, 2.5)", []int64{0, 0, 1, 1, 0}, nil)
	checkInts(t, b, "x not in (1)", []int64{1, 1, 0, 1, 1}, nil)
	checkInts(t, b, "x == 0", []int64{0, 1, 0, 0, 0}, nil)
	// min/max NaN anywhere
	checkFloats(t, b, "min(x, 1.5)", []float64{nan, -0.0, 1, 1.5, 1.5}, nil)
	checkFloats(t, b, "min(1.5, x)", []float64{nan, -0.0, 1, 1.5, 1.5}, nil)
	checkFloats(t, b, "max(1.5, x)", []float64{nan, 1.5, 1.5, 2.5, math.Inf(1)}, nil)
	checkFloats(t, b, "max(x, 1.5)", []float64{nan, 1.5, 1.5, 2.5, math.Inf(1)}, nil)
	checkFloats(t, b, "clip(x, 0, 2)", []float64{nan, 0, 1, 2, 2}, nil)
	checkInts(t, b, "bucketize(x, [0, 1, 2])", []int64{3, 1, 2, 3, 3}, nil)
	// int overflow
	checkInts(t, b, "abs(a)", []int64{math.MinInt64, math.MaxInt64, 1, 0, 1 << 60}, nil)
	checkInts(t, b, "a / -1", []int64{math.MinInt64, -math.MaxInt64, 1, 0, -(1 << 60)}, nil)
	checkInts(t, b, "a % -1", []int64{0, 0, 0, 0, 0}, nil)
	checkInts(t, b, "i / -1", []int64{math.MinInt32, -math.MaxInt32, 1, 0, -2}, nil)
	checkInts(t, b, "abs(i)", []int64{math.MinInt32, math.MaxInt32, 1, 0, 2}, nil)
	checkInts(t, b, "-i", []int64{math.MinInt32, -math.MaxInt32, 1, 0, -2}, nil)
	checkInts(t, b, "a + 1", []int64{math.MinInt64 + 1, math.MinInt64, 0, 1, 1<<60 + 1}, nil)
	checkInts(t, b, "i * i", []int64{0, 1, 1, 0, 4}, nil)
	checkInts(t, b, "a / n", []int64{math.MinInt64, 0, -1, 0, (1 << 60) / 3}, []int{1, 3})
	checkInts(t, b, "a % n", []int64{0, 0, 1, 0, (1 << 60) % 3}, []int{1, 3})
	// casts
	checkInts(t, b, "cast(d, int32)", []int64{0, 2147483647, -2147483648, 0, 0}, []int{0, 3, 4})
	checkInts(t, b, "cast(d, int64)", []int64{0, 2147483647, -2147483648, 2147483648, 0}, []int{0, 4})
	checkInts(t, b, "cast(x, int32)", []int64{0, 0, 1, 2, 0}, []int{0, 4})
	checkInts(t, b, "cast(a, int32)", []int64{0, -1, -1, 0, 0}, nil)
	checkFloats(t, b, "cast(a, float32)", []float64{float64(float32(math.MinInt64)), float64(float32(math.MaxInt64)), -1, 0, 1 << 60}, nil)
	// string
	checkInts(t, b, "len(s)", []int64{6, 0, 1, 1, 41}, nil)
	checkInts(t, b, "s < 'a'", []int64{0, 1, 1, 0, 0}, nil)
	checkInts(t, b, "starts_with(s, 'hé')", []int64{1, 0, 0, 0, 0}, nil)
	checkInts(t, b, "starts_with(s, '')", []int64{1, 1, 1, 1, 1}, nil)
	checkInts(t, b, "s == ''", []int64{0, 1, 0, 0, 0}, nil)
	// int vs float compare
	checkInts(t, b, "i < 2.5", []int64{1, 0, 1, 1, 1}, nil)
	checkInts(t, b, "i == 2.0", []int64{0, 0, 0, 0, 1}, nil)
	checkInts(t, b, "a == d", []int64{0, 0, 0, 0, 0}, nil)
	// hash_mod floats: -0.0 as 0, float32 same as float64 of equal value
	checkInts(t, b, "hash_mod(x, 65536) == hash_mod(cast(x, float64), 65536)", []int64{1, 1, 1, 1, 1}, nil)
}

// int64 -> float32 must round to nearest once (not via float64, which double rounds).
func TestCastInt64Float32DoubleRounding(t *testing.T) {
	v := int64(1<<60 + 1<<36 + 1) // nearest float32: 2^60 + 2^37
	b := batch(ints("a", column.Int64, []int64{v}, nil))
	want := float64(float32(1<<60 + 1<<37))
	checkFloats(t, b, "cast(a, float32)", []float64{want}, nil)
}

func TestFilterEdges(t *testing.T) {
	nan := math.NaN()
	b := batch(
		ints("n", column.Int32, []int64{1, 0, 2, 0, 3}, []byte{1, 0, 1, 0, 1}),
		ints("a", column.Int64, []int64{math.MinInt64, math.MaxInt64, -1, 0, 5}, []byte{1, 1, 1, 0, 1}),
		floats("x", column.Float32, []float64{nan, -0.0, 1, 2.5, math.Inf(1)}, nil),
		floats("y", column.Float64, []float64{nan, 0, 1, nan, 3}, []byte{1, 1, 0, 1, 1}),
		strs("s", []string{"héllo", "", "B", "a", "z"}, []byte{1, 1, 1, 0, 1}),
	)
	cases := []struct {
		src  string
		want []int32
	}{
		{"n != 1", []int32{2, 4}},
		{"not (n == 1)", []int32{1, 2, 3, 4}},
		{"n not in (1, 2)", []int32{4}},
		{"not (n not in (1, 2))", []int32{0, 1, 2, 3}},
		{"x != x", []int32{0}},
		{"x != 0", []int32{0, 2, 3, 4}},
		{"x == 0", []int32{1}},
		{"not (x < 2)", []int32{0, 3, 4}},
		{"x > 2 or x != x", []int32{0, 3, 4}},
		{"y != 0", []int32{0, 3, 4}},
		{"y == y", []int32{1, 4}},
		{"not (y == y)", []int32{0, 2, 3}},
		{"y not in (0)", []int32{0, 3, 4}},
		{"a != 0", []int32{0, 1, 2, 4}},
		{"a > -9223372036854775808", []int32{1, 2, 4}},
		{"a < 9223372036854775807", []int32{0, 2, 4}},
		{"a >= 9223372036854775807", []int32{1}},
		{"a <= -9223372036854775808", []int32{0}},
		{"a > 9.3e18", nil},
		{"a < -9.3e18", nil},
		{"a >= 9223372036854775807.0", []int32{1}},
		{"s != 'a'", []int32{0, 1, 2, 4}},
		{"s < 'a'", []int32{1, 2}},
		{"not starts_with(s, 'h')", []int32{1, 2, 3, 4}},
		{"s in ('', 'z')", []int32{1, 4}},
		{"s not in ('', 'z')", []int32{0, 2}},
		{"is_null(s) or s == 'z'", []int32{3, 4}},
		{"fill_null(n, 0) == 0", []int32{1, 3}},
		{"if(n > 1, true, false)", []int32{2, 4}},
		{"if(is_null(n), n > 0, true)", []int32{0, 2, 4}},
	}
	for _, c := range cases {
		e, err := expr.Compile(c.src, expr.BatchSchema(b))
		if err != nil {
			t.Errorf("%s: %v", c.src, err)
			continue
		}
		got, err := e.Filter(b, nil)
		if err != nil {
			t.Errorf("%s: %v", c.src, err)
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Filter(%s) = %v, want %v", c.src, got, c.want)
		}
		// Eval must agree with Filter
		out := eval(t, b, c.src)
		var ev []int32
		for i := range out.Len {
			if out.Data[i] != 0 && (out.Valid == nil || out.Valid[i] != 0) {
				ev = append(ev, int32(i))
			}
		}
		if !slices.Equal(ev, c.want) {
			t.Errorf("Eval(%s) true rows = %v, want %v", c.src, ev, c.want)
		}
	}
}

func TestIntFloatCompare(t *testing.T) {
	big := int64(1<<53 + 1)
	b := batch(
		ints("a", column.Int64, []int64{big, 1 << 53, -big, math.MaxInt64}, nil),
		floats("x", column.Float32, []float64{16777216, float64(float32(0.1)), 0.5, -0.0}, nil),
		floats("d", column.Float64, []float64{0.1, float64(float32(0.1)), 0.5, 0}, nil),
		ints("i", column.Int32, []int64{3, 2, 1, 0}, nil),
	)
	// done in float64
	checkInts(t, b, "a == 9007199254740992.0", []int64{1, 1, 0, 0}, nil)
	checkInts(t, b, "a > 9007199254740992.0", []int64{0, 0, 0, 1}, nil)
	checkInts(t, b, "a <= 9007199254740992.0", []int64{1, 1, 1, 0}, nil)
	checkInts(t, b, "a >= 9223372036854775807.0", []int64{0, 0, 0, 1}, nil)
	checkInts(t, b, "a == d", []int64{0, 0, 0, 0}, nil)
	// int literal takes the float type
	checkInts(t, b, "x == 16777217", []int64{1, 0, 0, 0}, nil)
	checkInts(t, b, "x == 0.1", []int64{0, 1, 0, 0}, nil)
	checkInts(t, b, "x == 0", []int64{0, 0, 0, 1}, nil)
	checkInts(t, b, "x == d", []int64{0, 1, 1, 1}, nil)
	checkInts(t, b, "d == 0.1", []int64{1, 0, 0, 0}, nil)
	checkInts(t, b, "i < 2.5", []int64{0, 1, 1, 1}, nil)
	checkInts(t, b, "i > 1.5", []int64{1, 1, 0, 0}, nil)
	checkInts(t, b, "i == 2.0", []int64{0, 1, 0, 0}, nil)
	checkInts(t, b, "i != 2.5", []int64{1, 1, 1, 1}, nil)
	checkInts(t, b, "i < 3000000000", []int64{1, 1, 1, 1}, nil)
	checkInts(t, b, "i > -3000000000", []int64{1, 1, 1, 1}, nil)
	checkInts(t, b, "i + 2147483647 > 0", []int64{0, 0, 0, 1}, nil) // int32 wraps
	checkFloats(t, b, "x * 2.5", []float64{float64(float32(16777216 * 2.5)), float64(float32(0.1) * float32(2.5)), 1.25, 0}, nil)
	checkInts(t, b, "hash_mod(x, 65536) == hash_mod(0, 65536)", []int64{0, 0, 0, 1}, nil)
}

func TestBucketize(t *testing.T) {
	b := batch(
		ints("a", column.Int64, []int64{1 << 53, 1<<53 + 1, 1<<53 + 2, math.MinInt64}, nil),
		ints("i", column.Int32, []int64{0, 1, 2, -1}, []byte{1, 1, 1, 0}),
		floats("x", column.Float32, []float64{float64(float32(0.1)), 0.09, math.NaN(), math.Inf(-1)}, nil),
	)
	checkInts(t, b, "bucketize(a, [9007199254740993])", []int64{0, 1, 1, 0}, nil)
	checkInts(t, b, "bucketize(a, [9007199254740993, 9007199254740993])", []int64{0, 2, 2, 0}, nil)
	checkInts(t, b, "bucketize(i, [0.5, 1, 1.5])", []int64{0, 2, 3, 0}, []int{3})
	checkInts(t, b, "bucketize(x, [0.1])", []int64{1, 0, 1, 0}, nil)
	checkInts(t, b, "bucketize(a, [-9223372036854775808])", []int64{1, 1, 1, 1}, nil)
}

func TestBigIntConstants(t *testing.T) {
	b := batch(ints("a", column.Int64, []int64{1 << 53, 1<<53 + 1, math.MaxInt64, math.MaxInt64 - 1}, nil))
	checkInts(t, b, "a == 9007199254740993", []int64{0, 1, 0, 0}, nil)
	checkInts(t, b, "a in (9007199254740993)", []int64{0, 1, 0, 0}, nil)
	checkInts(t, b, "a not in (9007199254740993, 9223372036854775807)", []int64{1, 0, 0, 1}, nil)
	checkInts(t, b, "a > 9007199254740992", []int64{0, 1, 1, 1}, nil)
	checkInts(t, b, "min(a, 9007199254740993)", []int64{1 << 53, 1<<53 + 1, 1<<53 + 1, 1<<53 + 1}, nil)
	checkInts(t, b, "clip(a, 0, 9223372036854775806)", []int64{1 << 53, 1<<53 + 1, math.MaxInt64 - 1, math.MaxInt64 - 1}, nil)
	checkInts(t, b, "fill_null(a, 9007199254740993)", []int64{1 << 53, 1<<53 + 1, math.MaxInt64, math.MaxInt64 - 1}, nil)
	checkInts(t, b, "a - 9223372036854775807", []int64{1<<53 - math.MaxInt64, 1<<53 + 1 - math.MaxInt64, 0, -1}, nil)
	checkInts(t, b, "if(a == 9007199254740993, 9223372036854775807, 0)", []int64{0, math.MaxInt64, 0, 0}, nil)
}
