package engine_test

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/parquet-go/parquet-go"
)

// TestPageFilter: in one row group of a time-ordered table, written in
// small pages with the page index, a time-window filter rules out the
// pages outside the window by their ColumnIndex: fewer pages are
// decoded, and the batches are those of a run that decodes every page
// (shuffled rows, two epochs, a late list column).
func TestPageFilter(t *testing.T) {
	dir := t.TempDir()
	type row struct {
		RowID int64   `parquet:"row_id"`
		TS    int64   `parquet:"ts,timestamp(microsecond)"`
		Site  string  `parquet:"site,dict"`
		Seq   []int64 `parquet:"seq,list"`
	}
	start := time.Date(2025, 11, 1, 0, 0, 0, 0, time.UTC)
	rows := make([]row, 20000)
	for i := range rows {
		rows[i] = row{RowID: int64(i), TS: start.Add(time.Duration(i) * time.Minute).UnixMicro(), Site: fmt.Sprintf("s%03d", (i*7)%300)}
		for k := range i % 6 {
			rows[i].Seq = append(rows[i].Seq, int64(i*10+k))
		}
	}
	path := filepath.Join(dir, "events.parquet")
	if err := parquet.WriteFile(path, rows, parquet.MaxRowsPerRowGroup(20000), parquet.PageBufferSize(4096)); err != nil {
		t.Fatal(err)
	}
	lo, hi := start.Add(9000*time.Minute), start.Add(11000*time.Minute)
	var want []int64
	for _, r := range rows {
		if r.TS >= lo.UnixMicro() && r.TS < hi.UnixMicro() && r.Site >= "s150" {
			want = append(want, r.RowID)
		}
	}
	for _, tc := range []struct {
		name, filter string
		fewer        bool
	}{
		{"a window inside the row group", fmt.Sprintf(`ts >= timestamp("%s", "us") and ts < timestamp("%s", "us") and site >= "s150"`,
			lo.Format(time.RFC3339), hi.Format(time.RFC3339)), true},
		{"no page ruled out", `site >= "s150"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := fmt.Sprintf(`
inputs: [%s]
columns: [row_id, ts, site, seq]
batch: {size: 50, last: keep}
epochs: 2
seed: 11
shuffle: {units: true, buffer: 300}
ring: {dir: %s, name: pages}
pipeline:
  - filter: '%s'
  - select: [row_id, ts, seq]
`, path, dir, tc.filter)
			st, got := runRowsStats(t, src, dir)
			old := engine.SetNeverPruneForTest(true)
			st0, whole := runRowsStats(t, src, dir)
			engine.SetNeverPruneForTest(old)
			for _, col := range []string{"row_id", "ts", "seq"} {
				if !slices.EqualFunc(got[col], whole[col], slices.Equal) || len(got[col]) == 0 {
					t.Fatalf("%s: %d rows, the batches differ from a run decoding every page (%d rows)", col, len(got[col]), len(whole[col]))
				}
			}
			if fewer := st.Pages.Pages < st0.Pages.Pages; fewer != tc.fewer {
				t.Fatalf("pages decoded: %d with the page filter, %d without; want fewer: %v", st.Pages.Pages, st0.Pages.Pages, tc.fewer)
			}
			if ruled := st.RowsRuledOut > 0; ruled != tc.fewer || st0.RowsRuledOut != 0 {
				t.Fatalf("rows ruled out: %d with the page filter, %d without", st.RowsRuledOut, st0.RowsRuledOut)
			}
			if tc.fewer {
				var ids []int64
				for _, r := range got["row_id"][:len(got["row_id"])/2] { // the first epoch
					ids = append(ids, r[0])
				}
				slices.Sort(ids)
				if !slices.Equal(ids, want) {
					t.Fatalf("the first epoch has %d rows, want %d", len(ids), len(want))
				}
				t.Logf("pages decoded: %d with the page filter, %d without", st.Pages.Pages, st0.Pages.Pages)
			}
		})
	}
}

// TestPageFilterResume: resuming a job whose units the page index
// narrows (counting the units before the cursor narrows them the same
// way) gives the uninterrupted run's tail, on every rank.
func TestPageFilterResume(t *testing.T) {
	dir := t.TempDir()
	type row struct {
		RowID int64 `parquet:"row_id"`
		TS    int64 `parquet:"ts"`
	}
	rows := make([]row, 9000)
	for i := range rows {
		rows[i] = row{RowID: int64(i), TS: int64(i) * 10}
	}
	path := filepath.Join(dir, "events.parquet")
	if err := parquet.WriteFile(path, rows, parquet.MaxRowsPerRowGroup(3000), parquet.PageBufferSize(1024)); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`
inputs: [%s]
batch: {size: 40, last: drop}
world_size: 2
epochs: 2
seed: 5
shuffle: {units: true, buffer: 100}
pipeline:
  - filter: "(ts >= 5000 and ts < 12000) or (ts >= 41000 and ts < 47000) or ts >= 88000"
`, path)
	full := runStreams(t, src, 2, nil)
	old := engine.SetNeverPruneForTest(true)
	whole := runStreams(t, src, 2, nil)
	engine.SetNeverPruneForTest(old)
	if !reflect.DeepEqual(full, whole) {
		t.Fatal("the batches differ from a run decoding every page")
	}
	for _, cur := range [][]engine.Cursor{{{Epoch: 0, Batch: 7}, {Epoch: 0, Batch: 9}}, {{Epoch: 1, Batch: 3}, {Epoch: 0, Batch: 20}}} {
		got := runStreams(t, src, 1, cur)
		for r := range full {
			want := tailFrom(full[r], cur[r])
			if len(want.cursors) == 0 || !reflect.DeepEqual(got[r], want) {
				t.Fatalf("resume %v: rank %d got %d batches, want the uninterrupted tail of %d", cur, r, len(got[r].cursors), len(want.cursors))
			}
		}
	}
}

// BenchmarkPageFilter times a job keeping one eighth of a time-ordered
// table, by a window inside its one row group (1,048,576 rows in 1 MiB
// pages, snappy, as pyarrow writes them), decoding every page of the
// filter's columns against ruling pages out by their ColumnIndex. The
// late columns' pages holding no kept row are skipped either way.
func BenchmarkPageFilter(b *testing.B) {
	dir := b.TempDir()
	type row struct {
		RowID int64   `parquet:"row_id"`
		TS    int64   `parquet:"ts,timestamp(microsecond)"`
		Site  string  `parquet:"site,dict"`
		Dense float32 `parquet:"dense"`
		Seq   []int64 `parquet:"seq,list"`
	}
	const n = 1 << 20
	start := time.Date(2025, 11, 1, 0, 0, 0, 0, time.UTC)
	rows := make([]row, n)
	for i := range rows {
		rows[i] = row{RowID: int64(i), TS: start.Add(time.Duration(i) * 500 * time.Millisecond).UnixMicro(),
			Site: fmt.Sprintf("s%03d", (i*7919)%300), Dense: float32(i % 1000)}
		for k := range i % 20 {
			rows[i].Seq = append(rows[i].Seq, int64(i*k))
		}
	}
	path := filepath.Join(dir, "events.parquet")
	if err := parquet.WriteFile(path, rows, parquet.MaxRowsPerRowGroup(n), parquet.PageBufferSize(1<<20),
		parquet.Compression(&parquet.Snappy)); err != nil {
		b.Fatal(err)
	}
	lo := start.Add(time.Duration(n/2) * 500 * time.Millisecond)
	hi := start.Add(time.Duration(n/2+n/8) * 500 * time.Millisecond)
	src := fmt.Sprintf(`
inputs: [%s]
batch: {size: 4096, last: keep}
decode: {workers: 1}
ring: {dir: %s, name: bench}
pipeline:
  - filter: 'ts >= timestamp("%s", "us") and ts < timestamp("%s", "us") and site >= "s100"'
`, path, dir, lo.Format(time.RFC3339Nano), hi.Format(time.RFC3339Nano))
	for _, never := range []bool{true, false} {
		b.Run(map[bool]string{true: "every-page", false: "page-filter"}[never], func(b *testing.B) {
			old := engine.SetNeverPruneForTest(never)
			defer engine.SetNeverPruneForTest(old)
			var st engine.Stats
			for b.Loop() {
				st, _ = runDenseStats(b, src, dir, "row_id")
			}
			b.ReportMetric(float64(st.Pages.Pages), "pages")
		})
	}
}
