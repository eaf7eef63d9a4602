package datagen_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/lastmile/lastmile/datagen"
)

const statRows = 200_000

func TestLabelRate(t *testing.T) {
	g := datagen.NewGenerator(datagen.DefaultConfig())
	pos := 0
	for r := range int64(statRows) {
		switch g.Label(r) {
		case 1:
			pos++
		case 0:
		default:
			t.Fatalf("row %d: label %d", r, g.Label(r))
		}
	}
	// 0.05 +- 8 standard deviations (0.0005 each).
	if rate := float64(pos) / statRows; rate < 0.046 || rate > 0.054 {
		t.Fatalf("positive rate %.4f, want about %.2f", rate, datagen.LabelRate)
	}
}

func TestSeqLengths(t *testing.T) {
	cfg := datagen.DefaultConfig()
	g := datagen.NewGenerator(cfg)
	for j := range cfg.Seqs {
		var sum, zeros, over256, atMax, short int
		minLen, maxLen := math.MaxInt, 0
		for r := range int64(statRows) {
			n := g.SeqLen(r, j)
			sum += n
			minLen, maxLen = min(minLen, n), max(maxLen, n)
			switch {
			case n == 0:
				zeros++
			case n > 256:
				over256++
			}
			if n == cfg.SeqMaxLen {
				atMax++
			}
			if n <= 10 {
				short++
			}
		}
		mean := float64(sum) / statRows
		t.Logf("seq_%d: mean %.2f, min %d, max %d, empty %d, <=10 %d, >256 %d, at max %d of %d",
			j, mean, minLen, maxLen, zeros, short, over256, atMax, statRows)
		if minLen != 0 || zeros < statRows/200 {
			t.Errorf("seq_%d: %d empty sequences (min %d), want at least 0.5%%", j, zeros, minLen)
		}
		if maxLen != cfg.SeqMaxLen {
			t.Errorf("seq_%d: longest %d, want %d", j, maxLen, cfg.SeqMaxLen)
		}
		if over256 < statRows/100 {
			t.Errorf("seq_%d: %d sequences over 256, want at least 1%%", j, over256)
		}
		if short < statRows/10 {
			t.Errorf("seq_%d: %d sequences of 10 or fewer, want at least 10%%", j, short)
		}
		if math.Abs(mean-float64(cfg.SeqMeanLen)) > 0.03*float64(cfg.SeqMeanLen) {
			t.Errorf("seq_%d: mean length %.2f, want %d +- 3%%", j, mean, cfg.SeqMeanLen)
		}
	}
}

func TestSeqMeanAcrossSettings(t *testing.T) {
	f := func(mean, maxLen int) {
		t.Helper()
		cfg := datagen.DefaultConfig()
		cfg.SeqMeanLen, cfg.SeqMaxLen = mean, maxLen
		g := datagen.NewGenerator(cfg)
		sum := 0
		for r := range int64(50_000) {
			n := g.SeqLen(r, 0)
			if n < 0 || n > maxLen {
				t.Fatalf("mean %d max %d: length %d", mean, maxLen, n)
			}
			sum += n
		}
		got := float64(sum) / 50_000
		if math.Abs(got-float64(mean)) > 0.05*float64(mean)+0.05 {
			t.Errorf("mean %d max %d: mean length %.2f", mean, maxLen, got)
		}
	}
	f(0, 0)
	f(0, 300)
	f(5, 300)
	f(50, 300)
	f(200, 300)
	f(300, 300)
	f(1000, 4096)
}

func TestNullFractions(t *testing.T) {
	cfg := datagen.DefaultConfig()
	cfg.Nullable = true
	g := datagen.NewGenerator(cfg)
	var dense, cat, seq, query, empty int
	var buf []int64
	for r := range int64(statRows) {
		if _, ok := g.DenseOpt(r); !ok {
			dense++
		}
		if _, ok := g.CatOpt(r); !ok {
			cat++
		}
		var ok bool
		buf, ok = g.AppendSeqOpt(buf[:0], r)
		switch {
		case !ok:
			seq++
		case len(buf) == 0:
			empty++
		}
		if _, ok := g.QueryOpt(r); !ok {
			query++
		}
	}
	for _, c := range []struct {
		name  string
		nulls int
	}{{"dense_opt", dense}, {"cat_opt", cat}, {"seq_opt", seq}, {"query_opt", query}} {
		// 0.01 +- 9 standard deviations (0.00022 each).
		if f := float64(c.nulls) / statRows; f < 0.008 || f > 0.012 {
			t.Errorf("%s: null fraction %.4f, want about %.2f", c.name, f, cfg.NullFraction)
		}
	}
	// Forced empties (NullFraction of the valid rows) plus the length
	// distribution's own.
	if f := float64(empty) / statRows; f < 0.015 {
		t.Errorf("seq_opt: empty fraction %.4f, want at least 0.015", f)
	}

	for _, frac := range []float64{0, 1} {
		cfg.NullFraction = frac
		g := datagen.NewGenerator(cfg)
		for r := range int64(1000) {
			_, ok1 := g.DenseOpt(r)
			_, ok2 := g.CatOpt(r)
			_, ok3 := g.AppendSeqOpt(nil, r)
			_, ok4 := g.QueryOpt(r)
			if want := frac == 0; ok1 != want || ok2 != want || ok3 != want || ok4 != want {
				t.Fatalf("NullFraction %v, row %d: valid %v %v %v %v", frac, r, ok1, ok2, ok3, ok4)
			}
		}
	}
}

// topShare returns the largest share of n draws that a single value takes.
func topShare(n int, draw func(i int64) int64) float64 {
	counts := map[int64]int{}
	top := 0
	for i := range int64(n) {
		c := counts[draw(i)] + 1
		counts[draw(i)] = c
		top = max(top, c)
	}
	return float64(top) / float64(n)
}

func TestIDRangesAndSkew(t *testing.T) {
	cfg := datagen.DefaultConfig()
	cfg.Cats, cfg.Seqs = 8, 4
	g := datagen.NewGenerator(cfg)
	const n = 50_000
	inRange := func(name string, v, card int64) {
		if v < 0 || v >= card {
			t.Fatalf("%s = %d, outside [0, %d)", name, v, card)
		}
	}
	var buf []int64
	for r := range int64(n) {
		inRange("user_id", g.UserID(r), datagen.Users)
		inRange("item_id", g.ItemID(r), datagen.Items)
		for j := range cfg.Cats {
			inRange("cat", g.Cat(r, j), datagen.CatCardinality(j))
		}
		for j := range cfg.Seqs {
			buf = g.AppendSeq(buf[:0], r, j)
			for _, v := range buf {
				inRange("seq element", v, datagen.SeqCardinality(j))
			}
		}
	}
	// A zipf-like column's most popular value takes far more than a
	// uniform share.
	for _, c := range []struct {
		name string
		card int64
		draw func(int64) int64
	}{
		{"user_id", datagen.Users, g.UserID},
		{"item_id", datagen.Items, g.ItemID},
		{"cat_0", datagen.CatCardinality(0), func(r int64) int64 { return g.Cat(r, 0) }},
		{"cat_1", datagen.CatCardinality(1), func(r int64) int64 { return g.Cat(r, 1) }},
	} {
		share := topShare(n, c.draw)
		t.Logf("%s: top value share %.4f", c.name, share)
		if uniform := 1 / float64(c.card); share < 5*uniform || share < 0.01 {
			t.Errorf("%s: top value share %.5f, not skewed", c.name, share)
		}
	}
	// Dictionary-encoded columns are exactly those of small cardinality.
	for _, c := range datagen.Schema(cfg) {
		if c.Kind == 0 && c.Physical == "INT64" && c.Name != "row_id" && c.Cardinality == 0 {
			t.Errorf("%s: no cardinality", c.Name)
		}
		if len(c.Name) > 4 && c.Name[:4] == "cat_" && c.Dict != (c.Cardinality <= datagen.DictMaxCardinality) {
			t.Errorf("%s: cardinality %d, dict %v", c.Name, c.Cardinality, c.Dict)
		}
	}
}

func TestDenseDistributions(t *testing.T) {
	cfg := datagen.DefaultConfig()
	g := datagen.NewGenerator(cfg)
	const n = 100_000
	for j := range 4 {
		var sum, sum2 float64
		zeros := 0
		for r := range int64(n) {
			x := float64(g.Dense(r, j))
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("dense_%d row %d: %v", j, r, x)
			}
			sum += x
			sum2 += x * x
			if x == 0 {
				zeros++
			}
			if j%2 == 1 && x < 0 {
				t.Fatalf("dense_%d row %d: negative %v", j, r, x)
			}
		}
		mean := sum / n
		variance := sum2/n - mean*mean
		if j%2 == 0 {
			if math.Abs(mean) > 0.02 || math.Abs(variance-1) > 0.03 {
				t.Errorf("dense_%d: mean %.4f variance %.4f, want about N(0, 1)", j, mean, variance)
			}
		} else if f := float64(zeros) / n; f < 0.18 || f > 0.22 {
			t.Errorf("dense_%d: zero fraction %.3f, want about 0.2", j, f)
		}
	}
}

func TestQueries(t *testing.T) {
	nonASCII := 0
	for q := range datagen.Queries {
		s := datagen.QueryString(q)
		if s == "" || !utf8.ValidString(s) || len(s) > 64 {
			t.Fatalf("query %d: %q", q, s)
		}
		if utf8.RuneCountInString(s) != len(s) {
			nonASCII++
		}
	}
	if nonASCII == 0 {
		t.Error("no query has non-ASCII characters")
	}
	g := datagen.NewGenerator(datagen.DefaultConfig())
	distinct := map[string]bool{}
	for r := range int64(10_000) {
		distinct[g.Query(r)] = true
	}
	if len(distinct) < 100 || len(distinct) > datagen.Queries {
		t.Errorf("%d distinct queries in 10k rows", len(distinct))
	}
}

// TestValuesStable pins a few values so that a change to how values are
// made, which would silently change every fixture and every test that
// compares against recorded numbers, fails here first.
func TestValuesStable(t *testing.T) {
	cfg := datagen.DefaultConfig()
	cfg.Nullable = true
	r := datagen.Expected(cfg, 12345)
	got := []any{r.UserID, r.ItemID, r.Label, r.Dense[0], r.Dense[1], r.Cats[0], r.Cats[1], len(r.Seqs[0]), len(r.Seqs[1]), r.Query}
	t.Logf("row 12345: %#v", got)
	want := goldenValues
	if !slices.Equal(fmtAll(got), fmtAll(want)) {
		t.Fatalf("row 12345 of the default config changed:\n got %v\nwant %v", got, want)
	}
}

func fmtAll(xs []any) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmtAny(x)
	}
	return out
}

func TestSchemaIndependence(t *testing.T) {
	// Feature counts, nulls and layout do not change the values of the
	// columns that exist in both configs.
	a := datagen.DefaultConfig()
	b := a
	b.Dense, b.Cats, b.Seqs, b.Nullable, b.Files, b.RowGroupRows, b.Compression = 4, 2, 1, true, 3, 10, "none"
	for r := range int64(1000) {
		x, y := datagen.Expected(a, r), datagen.Expected(b, r)
		if x.UserID != y.UserID || x.ItemID != y.ItemID || x.Label != y.Label || x.Query != y.Query ||
			!slices.Equal(x.Dense[:4], y.Dense) || !slices.Equal(x.Cats[:2], y.Cats) || !slices.Equal(x.Seqs[0], y.Seqs[0]) {
			t.Fatalf("row %d differs", r)
		}
	}
}

func TestExpectedMatchesFill(t *testing.T) {
	cfg := datagen.DefaultConfig()
	cfg.Nullable = true
	g := datagen.NewGenerator(cfg)
	var r datagen.Row
	for row := range int64(500) {
		g.Fill(row, &r)
		if d := diffRow(r, datagen.Expected(cfg, row)); d != "" {
			t.Fatalf("row %d: %s", row, d)
		}
	}
}

func TestFillDoesNotAllocate(t *testing.T) {
	cfg := datagen.DefaultConfig()
	cfg.Nullable = true
	g := datagen.NewGenerator(cfg)
	var r datagen.Row
	for row := range int64(2000) { // grow r's slices
		g.Fill(row, &r)
	}
	row := int64(0)
	allocs := testing.AllocsPerRun(200, func() {
		g.Fill(row%2000, &r)
		row++
	})
	if allocs != 0 {
		t.Fatalf("Fill allocates %.1f times per row", allocs)
	}
}

func BenchmarkFill(b *testing.B) {
	g := datagen.NewGenerator(datagen.DefaultConfig())
	var r datagen.Row
	row := int64(0)
	b.ReportAllocs()
	for b.Loop() {
		g.Fill(row, &r)
		row++
	}
}

// goldenValues is row 12345 of DefaultConfig with Nullable: user_id,
// item_id, label, dense_0, dense_1, cat_0, cat_1, len(seq_0), len(seq_1),
// query.
var goldenValues = []any{int64(679304), int64(2354889), int32(0), float32(-0.65123695), float32(0.013908397), int64(91), int64(2345691), 2, 41, "2024"}

func fmtAny(x any) string { return fmt.Sprintf("%T(%v)", x, x) }
