package engine_test

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/parquet-go/parquet-go"
)

// clickRow is a table written in time order, as event tables are: each
// row group covers a stretch of time.
type clickRow struct {
	RowID int64  `parquet:"row_id"`
	TS    int64  `parquet:"ts,timestamp(microsecond)"`
	Site  string `parquet:"site"`
}

// TestPruneByStatistics: a time-window filter skips the row groups whose
// statistics put them outside the window, reading none of their bytes,
// and trainers get the batches a run reading every row group gives, with
// units and rows shuffled alike.
func TestPruneByStatistics(t *testing.T) {
	dir := t.TempDir()
	start := time.Date(2025, 11, 1, 0, 0, 0, 0, time.UTC)
	rows := make([]clickRow, 10000)
	for i := range rows {
		rows[i] = clickRow{RowID: int64(i), TS: start.Add(time.Duration(i) * 3 * time.Minute).UnixMicro(), Site: fmt.Sprintf("s%03d", i%200)}
	}
	path := filepath.Join(dir, "clicks.parquet")
	if err := parquet.WriteFile(path, rows, parquet.MaxRowsPerRowGroup(1000)); err != nil {
		t.Fatal(err)
	}
	cut := time.Date(2025, 11, 20, 0, 0, 0, 0, time.UTC)
	var want []int64
	for _, r := range rows {
		if r.TS >= cut.UnixMicro() && r.Site >= "s100" {
			want = append(want, r.RowID)
		}
	}
	for _, tc := range []struct {
		name, filter string
		pruned       int
	}{
		{"a time window", `ts >= timestamp("2025-11-20", "us") and site >= "s100"`, 9},
		{"no row group ruled out", `site >= "s100" and ts >= timestamp("2025-11-01", "us") + 0 * row_id`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := fmt.Sprintf(`
inputs: [%s]
columns: [row_id, ts, site]
batch: {size: 50, last: keep}
epochs: 2
seed: 7
shuffle: {units: true, buffer: 300}
ring: {dir: %s, name: clicks}
pipeline:
  - filter: '%s'
`, path, dir, tc.filter)
			st, pruned := runDenseStats(t, src, dir, "row_id", "ts")
			old := engine.SetNeverPruneForTest(true)
			st0, whole := runDenseStats(t, src, dir, "row_id", "ts")
			engine.SetNeverPruneForTest(old)
			if st.UnitsPruned != tc.pruned || st0.UnitsPruned != 0 {
				t.Fatalf("units pruned: %d, want %d (%d with pruning off)", st.UnitsPruned, tc.pruned, st0.UnitsPruned)
			}
			for _, col := range []string{"row_id", "ts"} {
				if !slices.Equal(pruned[col], whole[col]) {
					t.Fatalf("%s: the batches differ from a run reading every row group", col)
				}
			}
			if tc.pruned > 0 {
				got := slices.Clone(pruned["row_id"][:len(pruned["row_id"])/2]) // the first epoch
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Fatalf("the first epoch has %d rows, want %d", len(got), len(want))
				}
			}
		})
	}
}

// BenchmarkPruneTimeWindow times a job keeping the last tenth of a
// time-ordered table (200,000 rows in 20 row groups, with a sequence
// column), reading every row group against pruning by statistics.
func BenchmarkPruneTimeWindow(b *testing.B) {
	dir := b.TempDir()
	type row struct {
		RowID int64   `parquet:"row_id"`
		TS    int64   `parquet:"ts,timestamp(microsecond)"`
		Seq   []int64 `parquet:"seq,list"`
	}
	start := time.Date(2025, 11, 1, 0, 0, 0, 0, time.UTC)
	rows := make([]row, 200000)
	for i := range rows {
		rows[i] = row{RowID: int64(i), TS: start.Add(time.Duration(i) * 10 * time.Second).UnixMicro()}
		for k := range i % 50 {
			rows[i].Seq = append(rows[i].Seq, int64(i*k))
		}
	}
	path := filepath.Join(dir, "clicks.parquet")
	if err := parquet.WriteFile(path, rows, parquet.MaxRowsPerRowGroup(10000), parquet.Compression(&parquet.Snappy)); err != nil {
		b.Fatal(err)
	}
	cut := start.Add(time.Duration(len(rows)*9/10) * 10 * time.Second)
	src := fmt.Sprintf(`
inputs: [%s]
columns: [row_id, ts, seq]
batch: {size: 1000, last: keep}
decode: {workers: 1}
ring: {dir: %s, name: bench}
pipeline:
  - filter: 'ts >= timestamp("%s", "us")'
`, path, dir, cut.Format(time.RFC3339))
	for _, never := range []bool{true, false} {
		b.Run(map[bool]string{true: "every-row-group", false: "pruned"}[never], func(b *testing.B) {
			old := engine.SetNeverPruneForTest(never)
			defer engine.SetNeverPruneForTest(old)
			var st engine.Stats
			for b.Loop() {
				st, _ = runDenseStats(b, src, dir, "row_id")
			}
			b.ReportMetric(float64(st.UnitsPruned), "units-pruned")
		})
	}
}

// scoreRow is a table sorted by a float score, with NaN scores here and
// there.
type scoreRow struct {
	RowID int64   `parquet:"row_id"`
	Score float64 `parquet:"score"`
	S32   float32 `parquet:"s32"`
}

// TestPruneFloats: float statistics prune row groups, and never one
// holding a row the filter keeps: NaN rows, which statistics leave out,
// pass filters such as "not (score < x)".
func TestPruneFloats(t *testing.T) {
	dir := t.TempDir()
	rows := make([]scoreRow, 10000)
	for i := range rows {
		rows[i] = scoreRow{RowID: int64(i), Score: float64(i) / 10000, S32: float32(i) / 10000}
		if i%997 == 5 {
			rows[i].Score, rows[i].S32 = math.NaN(), float32(math.NaN())
		}
	}
	path := filepath.Join(dir, "scores.parquet")
	if err := parquet.WriteFile(path, rows, parquet.MaxRowsPerRowGroup(1000)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, filter string
		pruned       int
		keep         func(r scoreRow) bool
	}{
		{"a float64 threshold", `score >= 0.9`, 9, func(r scoreRow) bool { return r.Score >= 0.9 }},
		{"a float32 range", `s32 > 0.25 and s32 < 0.35`, 8, func(r scoreRow) bool { return r.S32 > 0.25 && r.S32 < 0.35 }},
		{"NaN rows pass a negation", `not (score < 0.9)`, 0, func(r scoreRow) bool { return !(r.Score < 0.9) }},
		{"NaN rows pass !=", `score != 0.5`, 0, func(r scoreRow) bool { return r.Score != 0.5 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := fmt.Sprintf(`
inputs: [%s]
batch: {size: 50, last: keep}
ring: {dir: %s, name: scores}
pipeline:
  - filter: '%s'
`, path, dir, tc.filter)
			st, pruned := runDenseStats(t, src, dir, "row_id")
			old := engine.SetNeverPruneForTest(true)
			_, whole := runDenseStats(t, src, dir, "row_id")
			engine.SetNeverPruneForTest(old)
			if st.UnitsPruned != tc.pruned {
				t.Errorf("units pruned: %d, want %d", st.UnitsPruned, tc.pruned)
			}
			var want []int64
			for _, r := range rows {
				if tc.keep(r) {
					want = append(want, r.RowID)
				}
			}
			if !slices.Equal(pruned["row_id"], want) || !slices.Equal(whole["row_id"], want) {
				t.Fatalf("%d rows pruning, %d reading every row group; want %d", len(pruned["row_id"]), len(whole["row_id"]), len(want))
			}
		})
	}
}
