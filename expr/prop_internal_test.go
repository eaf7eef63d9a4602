package expr

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/column"
)

// randBatch makes a batch of rows rows with a column of every type
// expressions read; nullable columns always have a Valid mask (so that
// BatchSchema is the same for every batch) with about a fifth nulls.
func randBatch(rng *rand.Rand, rows int) *column.Batch {
	b := &column.Batch{Rows: rows}
	fixed := func(name string, dt column.DType, nullable bool, gen func(buf []byte)) {
		c := column.Column{Name: name, Kind: column.Fixed, DType: dt, Width: 1, Len: rows, Data: make([]byte, rows*dt.Size())}
		if nullable {
			c.Valid = make([]byte, rows)
		}
		for r := 0; r < rows; r++ {
			if nullable && rng.IntN(5) == 0 {
				continue // null: zero data
			}
			if nullable {
				c.Valid[r] = 1
			}
			gen(c.Data[r*dt.Size() : (r+1)*dt.Size()])
		}
		b.Columns = append(b.Columns, c)
	}
	smallInt := func() int64 {
		switch rng.IntN(20) {
		case 0:
			return math.MinInt32
		case 1:
			return math.MaxInt32
		case 2:
			return 0
		}
		return rng.Int64N(41) - 20
	}
	bigInt := func() int64 {
		switch rng.IntN(20) {
		case 0:
			return math.MinInt64
		case 1:
			return math.MaxInt64
		case 2:
			return int64(rng.Uint64())
		}
		return smallInt()
	}
	float := func() float64 {
		switch rng.IntN(30) {
		case 0:
			return math.NaN()
		case 1:
			return math.Inf(1)
		case 2:
			return math.Inf(-1)
		case 3:
			return math.Copysign(0, -1)
		case 4:
			return 1e12
		}
		return float64(rng.IntN(41)-20) / 4
	}
	i32 := func(buf []byte) { binary.LittleEndian.PutUint32(buf, uint32(smallInt())) }
	fixed("label", column.Int32, false, func(buf []byte) { binary.LittleEndian.PutUint32(buf, uint32(rng.IntN(2))) })
	fixed("user_id", column.Int64, false, func(buf []byte) { binary.LittleEndian.PutUint64(buf, uint64(bigInt())) })
	fixed("id_opt", column.Int64, true, func(buf []byte) { binary.LittleEndian.PutUint64(buf, uint64(bigInt())) })
	fixed("cat_0", column.Int32, false, i32)
	fixed("cat_opt", column.Int32, true, i32)
	fixed("small", column.Int8, false, func(buf []byte) { buf[0] = byte(rng.IntN(256)) })
	fixed("mid", column.Int16, true, func(buf []byte) { binary.LittleEndian.PutUint16(buf, uint16(rng.IntN(65536))) })
	fixed("dense_0", column.Float32, false, func(buf []byte) { binary.LittleEndian.PutUint32(buf, math.Float32bits(float32(float()))) })
	fixed("dense_1", column.Float32, true, func(buf []byte) { binary.LittleEndian.PutUint32(buf, math.Float32bits(float32(float()))) })
	fixed("d64", column.Float64, true, func(buf []byte) { binary.LittleEndian.PutUint64(buf, math.Float64bits(float())) })
	fixed("h16", column.Float16, false, func(buf []byte) { binary.LittleEndian.PutUint16(buf, uint16(rng.IntN(65536))) })
	fixed("b16", column.BFloat16, true, func(buf []byte) { binary.LittleEndian.PutUint16(buf, uint16(rng.IntN(65536))) })
	fixed("flag", column.Bool, false, func(buf []byte) { buf[0] = byte(rng.IntN(2)) })
	fixed("flag_opt", column.Bool, true, func(buf []byte) { buf[0] = byte(rng.IntN(2)) })
	words := []string{"", "a", "ab", "abc", "foo", "foobar", "b", "\xff", "zz"}
	strs := func(name string, nullable bool) {
		c := column.Column{Name: name, Kind: column.Bytes, DType: column.Uint8, Len: rows, Offsets: []int64{0}}
		if nullable {
			c.Valid = make([]byte, rows)
		}
		for r := 0; r < rows; r++ {
			if !nullable || rng.IntN(5) != 0 {
				c.Data = append(c.Data, words[rng.IntN(len(words))]...)
				if nullable {
					c.Valid[r] = 1
				}
			}
			c.Offsets = append(c.Offsets, int64(len(c.Data)))
		}
		b.Columns = append(b.Columns, c)
	}
	strs("query", false)
	strs("query_opt", true)
	seq := column.Column{Name: "seq_0", Kind: column.List, DType: column.Int64, Len: rows, Offsets: []int64{0}, Valid: make([]byte, rows)}
	for r := 0; r < rows; r++ {
		if rng.IntN(5) != 0 {
			seq.Valid[r] = 1
			seq.Data = append(seq.Data, make([]byte, 8*rng.IntN(4))...)
		}
		seq.Offsets = append(seq.Offsets, int64(len(seq.Data)/8))
	}
	b.Columns = append(b.Columns, seq)
	b.Columns = append(b.Columns, column.Column{Name: "emb", Kind: column.Fixed, DType: column.Float32, Width: 3, Len: rows, Data: make([]byte, 12*rows)})
	return b
}

// gen writes random expressions over randBatch's columns.
type gen struct{ rng *rand.Rand }

func (g gen) pick(s ...string) string { return s[g.rng.IntN(len(s))] }

func (g gen) num(d int) string {
	if d <= 0 || g.rng.IntN(4) == 0 {
		switch g.rng.IntN(3) {
		case 0:
			return g.pick("label", "user_id", "id_opt", "cat_0", "cat_opt", "small", "mid", "dense_0", "dense_1", "d64", "h16", "b16")
		case 1:
			return g.pick("0", "1", "2", "3", "-1", "-7", "10", "3000000000", "0.5", "-2.5", "1e-3", "100.0")
		}
		return g.pick("label", "cat_opt", "dense_1", "user_id")
	}
	d--
	switch g.rng.IntN(16) {
	case 0, 1, 2:
		return fmt.Sprintf("(%s %s %s)", g.num(d), g.pick("+", "-", "*", "/", "%"), g.num(d))
	case 3:
		return "-" + g.num(d)
	case 4:
		return fmt.Sprintf("%s(%s)", g.pick("log1p", "log", "exp", "sqrt", "abs"), g.num(d))
	case 5:
		return fmt.Sprintf("%s(%s, %s)", g.pick("min", "max"), g.num(d), g.num(d))
	case 6:
		return fmt.Sprintf("clip(%s, %s, %s)", g.num(d), g.pick("0", "-1.5", "label"), g.pick("10", "2.5"))
	case 7:
		return fmt.Sprintf("cast(%s, %s)", g.num(d), g.pick("int32", "int64", "float32", "float64"))
	case 8:
		return fmt.Sprintf("fill_null(%s, %s)", g.num(d), g.num(d))
	case 9:
		return fmt.Sprintf("if(%s, %s, %s)", g.cond(d), g.num(d), g.pick(g.num(d), "null"))
	case 10:
		return fmt.Sprintf("bucketize(%s, %s)", g.num(d), g.pick("[]", "[0]", "[0.1, 0.5, 1, 5]", "[-3, -2.5, 0, 0, 2, 3.5, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]"))
	case 11:
		return fmt.Sprintf("hash_mod(%s, %s)", g.pick(g.num(d), g.str(d), g.cond(d)), g.pick("1", "10", "65536", "1000003", "9223372036854775807"))
	case 12:
		return g.pick("len(seq_0)", "len(query_opt)", "len(emb)")
	case 13:
		return fmt.Sprintf("cast(%s, %s)", g.cond(d), g.pick("int32", "float32"))
	}
	return g.num(0)
}

func (g gen) str(d int) string {
	if d <= 0 || g.rng.IntN(3) == 0 {
		return g.pick("query", "query_opt", `"ab"`, `""`, `"foo"`)
	}
	d--
	switch g.rng.IntN(2) {
	case 0:
		return fmt.Sprintf("fill_null(%s, %s)", g.str(d), g.str(0))
	}
	return fmt.Sprintf("if(%s, %s, %s)", g.cond(d), g.str(d), g.pick(g.str(d), "null"))
}

func (g gen) cond(d int) string {
	if d <= 0 {
		return g.pick("flag", "flag_opt", "label == 1", "is_null(cat_opt)", "true")
	}
	d--
	switch g.rng.IntN(12) {
	case 0, 1, 2:
		return fmt.Sprintf("%s %s %s", g.num(d), g.pick("==", "!=", "<", "<=", ">", ">="), g.num(d))
	case 3:
		return fmt.Sprintf("%s %s %s", g.str(d), g.pick("==", "!=", "<", ">="), g.str(d))
	case 4:
		return fmt.Sprintf("%s %s (%s)", g.num(d), g.pick("in", "not in"), g.pick("3", "1, 2, 3.5", "-1, 0, 3000000000, 0.25", "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12"))
	case 5:
		return fmt.Sprintf("%s %s (%s)", g.str(d), g.pick("in", "not in"), g.pick(`"a"`, `"a", "foo", ""`, `"a", "b", "c", "d", "e", "f", "g", "h", "i", "abc"`))
	case 6:
		return fmt.Sprintf("starts_with(%s, %s)", g.str(d), g.pick(`"a"`, `""`, `"foo"`))
	case 7:
		return fmt.Sprintf("is_null(%s)", g.pick(g.num(d), g.str(d), "seq_0", "flag_opt"))
	case 8:
		return "not " + g.cond(d)
	case 9:
		return fmt.Sprintf("(%s) %s (%s)", g.cond(d), g.pick("and", "or"), g.cond(d))
	case 10:
		return fmt.Sprintf("(%s) %s (%s)", g.cond(0), g.pick("==", "!="), g.cond(0))
	}
	return fmt.Sprintf("if(%s, %s, %s)", g.cond(d), g.cond(d), g.pick(g.cond(d), "null"))
}

func (g gen) expr() string {
	switch g.rng.IntN(8) {
	case 0, 1, 2:
		return g.cond(3)
	case 3:
		return g.str(3)
	case 4:
		return fmt.Sprintf("cast(%s, bfloat16)", g.num(3))
	}
	return g.num(3)
}

// TestEvalMatchesReference compiles random expressions and checks Eval
// and Filter, over random batches of several sizes, against the row-at-a-
// time reference evaluated on the same expression compiled without
// constant folding.
func TestEvalMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	g := gen{rng}
	schema := BatchSchema(randBatch(rng, 1))
	n, compiled := 3000, 0
	if testing.Short() || raceEnabled {
		n = 500
	}
	for range n {
		src := g.expr()
		e, err := Compile(src, schema)
		if err != nil {
			t.Fatalf("Compile(%q): %v", src, err)
		}
		ref, err := compile(src, &checker{schema: schema, noFold: true})
		if err != nil {
			t.Fatalf("compile(%q) without folding: %v", src, err)
		}
		// Folding may prove a value non-null, never the reverse.
		if e.Type().Kind != ref.Type().Kind || e.Type().Nullable && !ref.Type().Nullable {
			t.Fatalf("%s: folded type %v, unfolded %v", src, e.Type(), ref.Type())
		}
		compiled++
		clone := e.Clone()
		for _, rows := range []int{0, 1, 7, 200, 3} {
			b := randBatch(rng, rows)
			checkBatch(t, e, ref, b)
			if rows == 200 {
				checkBatch(t, clone, ref, b)
			}
		}
	}
	t.Logf("%d expressions", compiled)
}

func checkBatch(t *testing.T, e, ref *Expr, b *column.Batch) {
	t.Helper()
	var out column.Column
	if err := e.Eval(b, &out); err != nil {
		t.Fatalf("%s: Eval: %v", e, err)
	}
	if err := out.Check(); err != nil || out.Len != b.Rows {
		t.Fatalf("%s: Eval gave a bad column: %v (len %d)", e, err, out.Len)
	}
	if (out.Valid != nil) != e.Type().Nullable {
		t.Fatalf("%s: Valid is %v for type %v", e, out.Valid != nil, e.Type())
	}
	var want []int32
	for r := 0; r < b.Rows; r++ {
		w := refEval(ref, ref.root, b, r)
		got := refColumnOut(&out, e.Type().Kind, r)
		if !sameValue(got, w, e.Type().Kind) {
			t.Fatalf("%s: row %d = %+v, reference %+v\nrow: %s", e, r, got, w, rowString(b, r))
		}
		if e.Type().Kind == Bool && w.truth() {
			want = append(want, int32(r))
		}
	}
	if e.Type().Kind != Bool {
		return
	}
	sel, err := e.Filter(b, make([]int32, 5))
	if err != nil {
		t.Fatalf("%s: Filter: %v", e, err)
	}
	if !slices.Equal(sel, want) {
		t.Fatalf("%s: Filter = %v, want %v", e, sel, want)
	}
	// Pruning is sound: a batch with a matching row may match.
	if len(want) > 0 && !e.MayMatch(batchStats(b)) {
		t.Fatalf("%s: MayMatch is false, but rows %v match", e, want)
	}
}

// batchStats returns exact statistics of b's columns, as a Parquet writer
// would record them (NaNs left out of the bounds).
func batchStats(b *column.Batch) func(string) (Range, bool) {
	return func(name string) (Range, bool) {
		c := b.Col(name)
		if c == nil {
			return Range{}, false
		}
		r := Range{Rows: int64(b.Rows), Min: math.Inf(1), Max: math.Inf(-1)}
		for row := 0; row < b.Rows; row++ {
			v := refColumn(c, row)
			switch {
			case v.null:
				r.NullCount++
			case c.Kind == column.Bytes:
				if !r.HasBounds || v.s < r.MinString {
					r.MinString = v.s
				}
				if !r.HasBounds || v.s > r.MaxString {
					r.MaxString = v.s
				}
				r.HasBounds = true
			default:
				f := v.f
				if c.DType != column.Float32 && c.DType != column.Float64 && c.DType != column.Float16 && c.DType != column.BFloat16 {
					f = float64(v.i)
				}
				if f == f {
					r.Min, r.Max, r.HasBounds = min(r.Min, f), max(r.Max, f), true
				}
			}
		}
		if b.Rows%3 == 0 {
			r.NullCount = -1 // unknown
		}
		return r, true
	}
}

func refColumnOut(c *column.Column, k Kind, r int) rv {
	if k == BFloat16 {
		if c.Valid != nil && c.Valid[r] == 0 {
			return rv{null: true}
		}
		return rv{u16: binary.LittleEndian.Uint16(c.Data[2*r:])}
	}
	return refColumn(c, r)
}

func sameValue(got, want rv, k Kind) bool {
	if got.null || want.null {
		return got.null == want.null
	}
	switch k {
	case Float32, Float64:
		return got.f == want.f || math.IsNaN(got.f) && math.IsNaN(want.f)
	case BFloat16:
		gf, wf := fromBFloat16(got.u16), fromBFloat16(want.u16)
		return gf == wf || gf != gf && wf != wf // -0 == 0: min(-0, 0) may be either
	case String:
		return got.s == want.s
	}
	return got.i == want.i
}

func rowString(b *column.Batch, r int) string {
	s := ""
	for i := range b.Columns {
		s += fmt.Sprintf("%s=%+v ", b.Columns[i].Name, refColumn(&b.Columns[i], r))
	}
	return s
}

func (g gen) pred(d int) string {
	if d <= 0 || g.rng.IntN(3) == 0 {
		col := g.pick("label", "user_id", "id_opt", "cat_0", "cat_opt", "small", "dense_0", "dense_1", "d64", "b16")
		lit := g.pick("0", "1", "-1", "5", "-20", "20", "2.5", "1e12", "3000000000")
		switch g.rng.IntN(8) {
		case 0:
			return fmt.Sprintf("%s %s %s", lit, g.pick("==", "!=", "<", "<=", ">", ">="), col)
		case 1:
			return fmt.Sprintf("%s %s (%s, %s)", col, g.pick("in", "not in"), lit, g.pick("0", "3", "-5", "2.5"))
		case 2:
			return fmt.Sprintf("query %s %s", g.pick("==", "!=", "<", ">=", ">"), g.pick(`"a"`, `"foo"`, `""`, `"zzz"`, `"\xff"`))
		case 3:
			return fmt.Sprintf("starts_with(%s, %s)", g.pick("query", "query_opt"), g.pick(`"a"`, `"fo"`, `""`, `"\xff"`, `"z"`))
		case 4:
			return fmt.Sprintf("is_null(%s)", g.pick("cat_opt", "id_opt", "query_opt", "flag_opt"))
		case 5:
			return g.pick("flag", "flag_opt", "flag == false", "query_opt in ('a', 'b')")
		}
		return fmt.Sprintf("%s %s %s", col, g.pick("==", "!=", "<", "<=", ">", ">="), lit)
	}
	d--
	switch g.rng.IntN(3) {
	case 0:
		return "not (" + g.pred(d) + ")"
	}
	return fmt.Sprintf("(%s) %s (%s)", g.pred(d), g.pick("and", "or"), g.pred(d))
}

// TestMayMatchSound checks MayMatch on small random row groups: never
// false when a row matches, and false often enough to be of use.
func TestMayMatchSound(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	g := gen{rng}
	schema := BatchSchema(randBatch(rng, 1))
	pruned, empty := 0, 0
	for range 5000 {
		src := g.pred(3)
		e, err := Compile(src, schema)
		if err != nil {
			t.Fatalf("Compile(%q): %v", src, err)
		}
		b := randBatch(rng, 1+rng.IntN(4))
		sel, err := e.Filter(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		may := e.MayMatch(batchStats(b))
		if len(sel) > 0 && !may {
			t.Fatalf("%s: MayMatch false, but rows %v match\n%s", src, sel, rowString(b, int(sel[0])))
		}
		if len(sel) == 0 {
			empty++
			if !may {
				pruned++
			}
		}
	}
	t.Logf("pruned %d of %d row groups without a match", pruned, empty)
	if pruned < empty/3 {
		t.Errorf("pruned only %d of %d row groups without a match", pruned, empty)
	}
}
