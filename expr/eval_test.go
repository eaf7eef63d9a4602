package expr_test

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/expr"
)

// Batch builders. valid is nil for a non-nullable column.

func batch(cols ...column.Column) *column.Batch {
	b := &column.Batch{Columns: cols}
	if len(cols) > 0 {
		b.Rows = cols[0].Len
	}
	return b
}

func ints(name string, dt column.DType, v []int64, valid []byte) column.Column {
	c := column.Column{Name: name, Kind: column.Fixed, DType: dt, Width: 1, Len: len(v), Valid: valid}
	for i, x := range v {
		if valid != nil && valid[i] == 0 {
			x = 0
		}
		switch dt.Size() {
		case 1:
			c.Data = append(c.Data, byte(x))
		case 2:
			c.Data = binary.LittleEndian.AppendUint16(c.Data, uint16(x))
		case 4:
			c.Data = binary.LittleEndian.AppendUint32(c.Data, uint32(x))
		default:
			c.Data = binary.LittleEndian.AppendUint64(c.Data, uint64(x))
		}
	}
	return c
}

func floats(name string, dt column.DType, v []float64, valid []byte) column.Column {
	c := column.Column{Name: name, Kind: column.Fixed, DType: dt, Width: 1, Len: len(v), Valid: valid}
	for i, x := range v {
		if valid != nil && valid[i] == 0 {
			x = 0
		}
		if dt == column.Float32 {
			c.Data = binary.LittleEndian.AppendUint32(c.Data, math.Float32bits(float32(x)))
		} else {
			c.Data = binary.LittleEndian.AppendUint64(c.Data, math.Float64bits(x))
		}
	}
	return c
}

func strs(name string, v []string, valid []byte) column.Column {
	c := column.Column{Name: name, Kind: column.Bytes, DType: column.Uint8, Len: len(v), Offsets: []int64{0}, Valid: valid, Data: []byte{}}
	for i, s := range v {
		if valid == nil || valid[i] != 0 {
			c.Data = append(c.Data, s...)
		}
		c.Offsets = append(c.Offsets, int64(len(c.Data)))
	}
	return c
}

func eval(t *testing.T, b *column.Batch, src string) *column.Column {
	t.Helper()
	e, err := expr.Compile(src, expr.BatchSchema(b))
	if err != nil {
		t.Fatalf("Compile(%q): %v", src, err)
	}
	out := &column.Column{Name: "out"}
	if err := e.Eval(b, out); err != nil {
		t.Fatalf("Eval(%q): %v", src, err)
	}
	if err := out.Check(); err != nil {
		t.Fatalf("Eval(%q): %v", src, err)
	}
	if out.Name != "out" || out.Len != b.Rows {
		t.Fatalf("Eval(%q): name %q, len %d", src, out.Name, out.Len)
	}
	return out
}

// nulls marks the null rows of want (nil: none).
func nullsOf(c *column.Column) []int {
	var n []int
	for i, v := range c.Valid {
		if v == 0 {
			n = append(n, i)
		}
	}
	return n
}

func checkInts(t *testing.T, b *column.Batch, src string, want []int64, nulls []int) {
	t.Helper()
	out := eval(t, b, src)
	var got []int64
	for i := range out.Len {
		switch out.DType {
		case column.Int32:
			got = append(got, int64(out.Int32s()[i]))
		case column.Int64:
			got = append(got, out.Int64s()[i])
		case column.Bool:
			got = append(got, int64(out.Data[i]))
		default:
			t.Fatalf("%s: dtype %v", src, out.DType)
		}
	}
	if !slices.Equal(got, want) || !slices.Equal(nullsOf(out), nulls) {
		t.Errorf("%s = %v (nulls %v), want %v (nulls %v)", src, got, nullsOf(out), want, nulls)
	}
}

func checkFloats(t *testing.T, b *column.Batch, src string, want []float64, nulls []int) {
	t.Helper()
	out := eval(t, b, src)
	var got []float64
	for i := range out.Len {
		switch out.DType {
		case column.Float32:
			got = append(got, float64(out.Float32s()[i]))
		case column.Float64:
			got = append(got, out.Float64s()[i])
		default:
			t.Fatalf("%s: dtype %v", src, out.DType)
		}
	}
	eq := func(a, b float64) bool { return a == b || a != a && b != b }
	if !slices.EqualFunc(got, want, eq) || !slices.Equal(nullsOf(out), nulls) {
		t.Errorf("%s = %v (nulls %v), want %v (nulls %v)", src, got, nullsOf(out), want, nulls)
	}
}

func TestArithmetic(t *testing.T) {
	b := batch(
		ints("a", column.Int64, []int64{7, -7, 7, -7, math.MinInt64, 5}, nil),
		ints("d", column.Int64, []int64{2, 2, -2, -2, -1, 0}, nil),
		ints("i", column.Int32, []int64{math.MaxInt32, 1, 2, 3, 4, 5}, nil),
		floats("x", column.Float32, []float64{7, -7, 7, -7, 0.5, 5}, nil),
	)
	// Integer / and % are floored (Python's // and %); by zero is null.
	checkInts(t, b, "a / d", []int64{3, -4, -4, 3, math.MinInt64, 0}, []int{5})
	checkInts(t, b, "a % d", []int64{1, 1, -1, -1, 0, 0}, []int{5})
	checkInts(t, b, "a % 3", []int64{1, 2, 1, 2, 1, 2}, nil)
	checkInts(t, b, "a / 3", []int64{2, -3, 2, -3, -3074457345618258603, 1}, nil)
	checkInts(t, b, "a % -3", []int64{-2, -1, -2, -1, -2, -1}, nil)
	checkInts(t, b, "a / 0", []int64{0, 0, 0, 0, 0, 0}, []int{0, 1, 2, 3, 4, 5})
	checkInts(t, b, "i + 1", []int64{math.MinInt32, 2, 3, 4, 5, 6}, nil) // int32 wraps
	checkInts(t, b, "i + 3000000000", []int64{3000000000 + math.MaxInt32, 3000000001, 3000000002, 3000000003, 3000000004, 3000000005}, nil)
	checkInts(t, b, "-i * 2 - 1", []int64{1, -3, -5, -7, -9, -11}, nil) // -2^32 + 1 wraps to 1
	checkFloats(t, b, "x % 2", []float64{1, 1, 1, 1, 0.5, 1}, nil)
	checkFloats(t, b, "x % -2", []float64{-1, -1, -1, -1, -1.5, -1}, nil)
	checkFloats(t, b, "x / 0", []float64{math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(1)}, nil)
	checkFloats(t, b, "x * 2.5 - 1", []float64{16.5, -18.5, 16.5, -18.5, 0.25, 11.5}, nil)
	checkFloats(t, b, "i / 2.0", []float64{1073741823.5, 0.5, 1, 1.5, 2, 2.5}, nil)
}

func TestNulls(t *testing.T) {
	v := []byte{1, 0, 1, 0}
	b := batch(
		ints("a", column.Int32, []int64{1, 2, 3, 4}, nil),
		ints("n", column.Int32, []int64{1, 0, 5, 0}, v),
		strs("s", []string{"ab", "", "b", ""}, v),
		ints("f", column.Bool, []int64{1, 0, 0, 0}, v),
	)
	checkInts(t, b, "a + n", []int64{2, 0, 8, 0}, []int{1, 3})
	// Comparisons with null are false, both ways.
	checkInts(t, b, "n == 1", []int64{1, 0, 0, 0}, nil)
	checkInts(t, b, "n != 1", []int64{0, 0, 1, 0}, nil)
	checkInts(t, b, "not n == 1", []int64{0, 1, 1, 1}, nil)
	checkInts(t, b, "n in (5, 1)", []int64{1, 0, 1, 0}, nil)
	checkInts(t, b, "n not in (5)", []int64{1, 0, 0, 0}, nil)
	checkInts(t, b, "s == 'ab' or starts_with(s, 'b')", []int64{1, 0, 1, 0}, nil)
	checkInts(t, b, "is_null(n)", []int64{0, 1, 0, 1}, nil)
	checkInts(t, b, "fill_null(n, -1)", []int64{1, -1, 5, -1}, nil)
	checkInts(t, b, "fill_null(n, a * 10)", []int64{1, 20, 5, 40}, nil)
	checkInts(t, b, "if(n > 2, a, n)", []int64{1, 0, 3, 0}, []int{1, 3})
	checkInts(t, b, "if(a > 2, a, null)", []int64{0, 0, 3, 4}, []int{0, 1})
	// A null bool is false for and, or, not and if.
	checkInts(t, b, "f", []int64{1, 0, 0, 0}, []int{1, 3})
	checkInts(t, b, "not f", []int64{0, 1, 1, 1}, nil)
	checkInts(t, b, "f or a == 2", []int64{1, 1, 0, 0}, nil)
	checkInts(t, b, "if(f, 1, 0)", []int64{1, 0, 0, 0}, nil)
	checkInts(t, b, "len(s)", []int64{2, 0, 1, 0}, []int{1, 3})
	out := eval(t, b, "fill_null(s, 'x')")
	if out.Kind != column.Bytes || out.Valid != nil || string(out.Data) != "abxbx" || !slices.Equal(out.Offsets, []int64{0, 2, 3, 4, 5}) {
		t.Errorf("fill_null(s, 'x') = %+v", out)
	}
	out = eval(t, b, "if(a > 2, s, 'z')")
	if string(out.Data) != "zzb" || !slices.Equal(nullsOf(out), []int{3}) || !slices.Equal(out.Offsets, []int64{0, 1, 2, 3, 3}) {
		t.Errorf("if(a > 2, s, 'z') = %+v", out)
	}
}

func TestFunctions(t *testing.T) {
	nan := math.NaN()
	b := batch(
		floats("x", column.Float32, []float64{0.1, 0.09, 0.5, 5, 6, -1, nan, 1}, nil),
		floats("y", column.Float64, []float64{0.1, 0.09, 0.5, 5, 6, -1, nan, 1}, nil),
		ints("i", column.Int64, []int64{0, -3, 1, 2, 10, -1, 4, 1}, nil),
	)
	// torch.bucketize(x, boundaries, right=True), numpy.searchsorted(side="right").
	checkInts(t, b, "bucketize(x, [0.1, 0.5, 1, 5])", []int64{1, 0, 2, 4, 4, 0, 4, 3}, nil)
	checkInts(t, b, "bucketize(y, [0.1, 0.5, 1, 5])", []int64{1, 0, 2, 4, 4, 0, 4, 3}, nil)
	checkInts(t, b, "bucketize(i, [0.5, 1, 1, 2.5])", []int64{0, 0, 3, 3, 4, 0, 4, 3}, nil)
	checkInts(t, b, "bucketize(i, [])", []int64{0, 0, 0, 0, 0, 0, 0, 0}, nil)
	checkFloats(t, b, "clip(x * 10, 0, 10)", []float64{1, float64(float32(0.09) * 10), 5, 10, 10, 0, nan, 10}, nil)
	checkInts(t, b, "clip(i, -1, 3)", []int64{0, -1, 1, 2, 3, -1, 3, 1}, nil)
	checkFloats(t, b, "min(y, 0.5)", []float64{0.1, 0.09, 0.5, 0.5, 0.5, -1, nan, 0.5}, nil)
	checkInts(t, b, "max(i, 0, 1)", []int64{1, 1, 1, 2, 10, 1, 4, 1}, nil)
	checkInts(t, b, "abs(i)", []int64{0, 3, 1, 2, 10, 1, 4, 1}, nil)
	checkFloats(t, b, "sqrt(i)", []float64{0, nan, 1, math.Sqrt2, math.Sqrt(10), nan, 2, 1}, nil)
	checkFloats(t, b, "log1p(y)", []float64{math.Log1p(0.1), math.Log1p(0.09), math.Log1p(0.5), math.Log1p(5), math.Log1p(6), math.Inf(-1), nan, math.Ln2}, nil)
	checkFloats(t, b, "exp(cast(i, float32))", []float64{1, float64(float32(math.Exp(-3))), float64(float32(math.E)), float64(float32(math.Exp(2))), float64(float32(math.Exp(10))), float64(float32(math.Exp(-1))), float64(float32(math.Exp(4))), float64(float32(math.E))}, nil)
	checkInts(t, b, "cast(y * 10, int32)", []int64{1, 0, 5, 50, 60, -10, 0, 10}, []int{6})
	checkInts(t, b, "cast(y * 1e12, int32)", []int64{0, 0, 0, 0, 0, -0, 0, 0}, []int{0, 1, 2, 3, 4, 5, 6, 7})
	var want []int64
	for _, y := range []float64{0.1, 0.09, 0.5, 5, 6, -1, 0, 1} {
		want = append(want, int64(-y*1e9)) // truncated toward zero
	}
	checkInts(t, b, "cast(-y * 1e9, int64)", want, []int{6})
	checkInts(t, b, "cast(i > 1, int32) + cast(true, int64)", []int64{1, 1, 1, 2, 2, 1, 2, 1}, nil)
	checkInts(t, b, "i in (1, 2.0, 2.5, 10)", []int64{0, 0, 1, 1, 1, 0, 0, 1}, nil)
}

func TestBFloat16(t *testing.T) {
	// Bit patterns torch 1.13 gives for torch.tensor(v, dtype=torch.float32).to(torch.bfloat16).
	vals := []float64{1.0, 3.14159, 1.00390625, 1.01171875, -2.5e-40, 3.4028235e38, 3.3895314e38, math.Inf(1), math.Inf(-1), 65504.0, 1e-45, math.Copysign(0, -1), 0.1}
	want := []uint16{0x3f80, 0x4049, 0x3f80, 0x3f82, 0x8003, 0x7f80, 0x7f7f, 0x7f80, 0xff80, 0x4780, 0x0, 0x8000, 0x3dcd}
	b := batch(floats("x", column.Float32, vals, nil))
	out := eval(t, b, "cast(x, bfloat16)")
	if out.DType != column.BFloat16 || len(out.Data) != 2*len(vals) {
		t.Fatalf("cast(x, bfloat16): dtype %v, %d bytes", out.DType, len(out.Data))
	}
	for i, w := range want {
		if got := binary.LittleEndian.Uint16(out.Data[2*i:]); got != w {
			t.Errorf("bfloat16(%v) = %#04x, want %#04x", vals[i], got, w)
		}
	}
	b = batch(floats("x", column.Float32, []float64{math.NaN()}, nil))
	if got := binary.LittleEndian.Uint16(eval(t, b, "cast(x, bfloat16)").Data); got&0x7fff <= 0x7f80 {
		t.Errorf("bfloat16(NaN) = %#04x, not a NaN", got)
	}
}

func TestNarrowAndHalfColumns(t *testing.T) {
	b := batch(
		ints("i8", column.Int8, []int64{-128, 127, -1}, nil),
		ints("u8", column.Uint8, []int64{255, 0, 1}, nil),
		ints("i16", column.Int16, []int64{-32768, 1, -1}, []byte{1, 1, 0}),
		ints("h", column.Float16, []int64{0x3c00, 0x0001, 0xfc00}, nil), // 1, 2^-24, -inf
		ints("bf", column.BFloat16, []int64{0x3f80, 0xc049, 0x7f80}, nil),
	)
	checkInts(t, b, "i8 + u8 + i16", []int64{-32641, 128, 0}, []int{2})
	checkFloats(t, b, "h", []float64{1, math.Ldexp(1, -24), math.Inf(-1)}, nil)
	checkFloats(t, b, "bf * 1", []float64{1, -3.140625, math.Inf(1)}, nil)
}

func TestFilter(t *testing.T) {
	n := 1000
	label, uid, opt := make([]int64, n), make([]int64, n), make([]int64, n)
	valid := make([]byte, n)
	for i := range n {
		label[i], uid[i], opt[i] = int64(i%7/6), int64(i*3), int64(i%5)
		if i%3 != 0 {
			valid[i] = 1
		}
	}
	b := batch(ints("label", column.Int32, label, nil), ints("user_id", column.Int64, uid, nil), ints("cat_opt", column.Int32, opt, valid))
	f := func(src string, keep func(i int) bool) {
		t.Helper()
		e, err := expr.Compile(src, expr.BatchSchema(b))
		if err != nil {
			t.Fatal(err)
		}
		var want []int32
		for i := range n {
			if keep(i) {
				want = append(want, int32(i))
			}
		}
		buf := []int32{-1, -1, -1}
		for range 2 { // the second time with grown scratch
			got, err := e.Filter(b, buf)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("Filter(%s) = %v,\nwant %v", src, got, want)
			}
			buf = got
		}
	}
	f("label == 1 or user_id % 10 == 0", func(i int) bool { return i%7 == 6 || i*3%10 == 0 })
	f("label == 1 and user_id % 10 == 0", func(i int) bool { return i%7 == 6 && i*3%10 == 0 })
	f("label == 1 or (user_id % 10 == 0 and not is_null(cat_opt))", func(i int) bool { return i%7 == 6 || i*3%10 == 0 && i%3 != 0 })
	f("not (label == 1 or cat_opt > 2)", func(i int) bool { return !(i%7 == 6 || i%3 != 0 && i%5 > 2) })
	f("user_id < 30 and cat_opt == 1", func(i int) bool { return i < 10 && i%3 != 0 && i%5 == 1 })
	f("user_id > 2994", func(i int) bool { return i == 999 })
	f("true", func(int) bool { return true })
	f("label == 1 or true", func(int) bool { return true })
	f("false or label == 2", func(int) bool { return false })
	f("is_null(cat_opt) or cat_opt == 0", func(i int) bool { return i%3 == 0 || i%5 == 0 })
}

func TestRuntimeErrors(t *testing.T) {
	b := batch(ints("a", column.Int32, []int64{1, 2}, nil), ints("n", column.Int32, []int64{1, 0}, []byte{1, 0}))
	f := func(e *expr.Expr, b *column.Batch, msg string) {
		t.Helper()
		var out column.Column
		err := e.Eval(b, &out)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("Eval(%s) = %v, want %q", e, err, msg)
		}
	}
	e, _ := expr.Compile("a + 1", expr.BatchSchema(b))
	f(e, batch(ints("b", column.Int32, []int64{1}, nil)), `column "a" is not in the batch`)
	f(e, batch(ints("a", column.Int64, []int64{1}, nil)), `column "a" is fixed int64 in the batch, but the expression was compiled for int32`)
	e, _ = expr.Compile("a", expr.Schema{{Name: "a", Type: typ(expr.Int32, false)}})
	f(e, batch(ints("a", column.Int32, []int64{1, 2}, []byte{1, 0})), `column "a" has nulls, but the expression was compiled for a non-nullable column`)
	checkInts(t, batch(ints("a", column.Int32, []int64{1, 2}, []byte{1, 1})), "a", []int64{1, 2}, nil)
	if _, err := e.Filter(b, nil); err == nil || !strings.Contains(err.Error(), "a filter needs bool") {
		t.Errorf("Filter of an int32 expression: %v", err)
	}
}

// TestEvalReusesOut checks that a second Eval into the same column keeps
// its buffers and fully overwrites it.
func TestEvalReusesOut(t *testing.T) {
	b := batch(ints("n", column.Int32, []int64{1, 0, 3}, []byte{1, 0, 1}))
	e, err := expr.Compile("n * 2", expr.BatchSchema(b))
	if err != nil {
		t.Fatal(err)
	}
	var out column.Column
	if err := e.Eval(b, &out); err != nil {
		t.Fatal(err)
	}
	data := &out.Data[0]
	small := batch(ints("n", column.Int32, []int64{4, 5}, []byte{0, 1}))
	if err := e.Eval(small, &out); err != nil {
		t.Fatal(err)
	}
	if &out.Data[0] != data || out.Len != 2 || !slices.Equal(out.Int32s(), []int32{0, 10}) || !slices.Equal(out.Valid, []byte{0, 1}) {
		t.Errorf("second Eval: %+v", out)
	}
	allocs := testing.AllocsPerRun(10, func() {
		if err := e.Eval(b, &out); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Eval allocates %v times per call in steady state", allocs)
	}
}

// TestNoAllocs checks that Filter and Eval allocate nothing once their
// scratch has grown.
func TestNoAllocs(t *testing.T) {
	bt := benchBatch(16384)
	for _, src := range []string{
		"label == 1 or user_id % 10 == 0",
		"label == 1 or (user_id % 10 == 0 and not is_null(cat_opt))",
		`query == "foo" or starts_with(query, "ab")`,
		"not (cat_0 in (3, 17, 42) and dense_0 > 0.5)",
		"hash_mod(query, 65536) < 100 or dense_1 < 0",
		"if(label == 1, 1.0, 0.0) + clip(log1p(dense_0), 0, 10)",
		"fill_null(cat_opt, -1) + bucketize(dense_0, [0.1, 0.5, 1, 5])",
	} {
		e, err := expr.Compile(src, expr.BatchSchema(bt))
		if err != nil {
			t.Fatal(err)
		}
		var out column.Column
		sel := make([]int32, 0, bt.Rows)
		run := func() {
			if e.Type().Kind == expr.Bool {
				sel, err = e.Filter(bt, sel)
			} else {
				err = e.Eval(bt, &out)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		run()
		if a := testing.AllocsPerRun(5, run); a != 0 {
			t.Errorf("%s: %v allocations per run", src, a)
		}
	}
}

func TestEmptyAndMalformed(t *testing.T) {
	b := batch(ints("a", column.Int32, []int64{1, 2}, nil), strs("s", []string{"x", "yz"}, []byte{1, 1}))
	b.Columns = append(b.Columns, column.Column{Name: "l", Kind: column.List, DType: column.Int64, Len: 2, Offsets: []int64{0, 1, 3}, Data: make([]byte, 24)})
	e, err := expr.Compile("a == 1 or s == 'yz' or len(l) > 1 or hash_mod(s, 7) == 3", expr.BatchSchema(b))
	if err != nil {
		t.Fatal(err)
	}
	b.Reset() // zero rows, offsets emptied
	if sel, err := e.Filter(b, nil); err != nil || len(sel) != 0 {
		t.Errorf("Filter of an empty batch = %v, %v", sel, err)
	}
	b = batch(ints("a", column.Int32, []int64{1, 2}, nil), strs("s", []string{"x", "yz"}, []byte{1, 1}))
	b.Columns = append(b.Columns, column.Column{Name: "l", Kind: column.List, DType: column.Int64, Len: 2, Offsets: []int64{0, 1, 9}, Data: make([]byte, 24)})
	if _, err := e.Filter(b, nil); err == nil || !strings.Contains(err.Error(), `column "l" is malformed`) {
		t.Errorf("Filter of a malformed batch: %v", err)
	}
	b.Columns[0].Data = b.Columns[0].Data[:4]
	if _, err := e.Filter(b, nil); err == nil || !strings.Contains(err.Error(), `column "a" is malformed`) {
		t.Errorf("Filter of a malformed batch: %v", err)
	}
}

// TestEvalInPlace replaces columns of the batch with expressions of
// themselves.
func TestEvalInPlace(t *testing.T) {
	b := batch(
		floats("x", column.Float32, []float64{0, 1, 3}, []byte{1, 0, 1}),
		strs("s", []string{"ab", "", "c"}, []byte{1, 0, 1}),
		ints("i", column.Int32, []int64{5, 6, 7}, nil),
	)
	for _, c := range []struct {
		src string
		col int
	}{{"fill_null(x * 2, -1)", 0}, {"fill_null(s, 'zz')", 1}, {"cast(i, float64) / 2", 2}, {"s", 1}} {
		e, err := expr.Compile(c.src, expr.BatchSchema(b))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Eval(b, &b.Columns[c.col]); err != nil {
			t.Fatal(err)
		}
		if err := b.Check(); err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
	}
	if got := b.Columns[0].Float32s(); !slices.Equal(got, []float32{0, -1, 6}) || b.Columns[0].Valid != nil {
		t.Errorf("x = %v", got)
	}
	if got := string(b.Columns[1].Data); got != "abzzc" || !slices.Equal(b.Columns[1].Offsets, []int64{0, 2, 4, 5}) {
		t.Errorf("s = %q %v", got, b.Columns[1].Offsets)
	}
	if got := b.Columns[2].Float64s(); !slices.Equal(got, []float64{2.5, 3, 3.5}) || b.Columns[2].Name != "i" {
		t.Errorf("i = %v (%s)", got, b.Columns[2].Name)
	}
}
