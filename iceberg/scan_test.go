package iceberg_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/expr"
	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/iceberg/icebergtest"
)

// rows returns n rows with ids from start, parts cycling over "a".."d".
func rows(start, n int) []icebergtest.Row {
	out := make([]icebergtest.Row, n)
	for i := range out {
		id := int64(start + i)
		out[i] = icebergtest.Row{ID: id, Part: string(rune('a' + id%4)), Key: id * 7, Score: float64(id) / 2}
	}
	return out
}

// twoSnapshots writes a table partitioned by part, with rows 0..99 in the
// first snapshot and 100..149 (parts a and b only) added in the second.
func twoSnapshots(t *testing.T) (tab *icebergtest.Table, s1, s2 int64, meta1, meta2 string) {
	t.Helper()
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "events"), icebergtest.Layout{ByPart: true})
	if err != nil {
		t.Fatal(err)
	}
	if s1, meta1, err = tab.Append(rows(0, 100)); err != nil {
		t.Fatal(err)
	}
	second := rows(100, 50)
	for i := range second {
		second[i].Part = string(rune('a' + i%2))
	}
	if s2, meta2, err = tab.Append(second); err != nil {
		t.Fatal(err)
	}
	return tab, s1, s2, meta1, meta2
}

func countRows(files []iceberg.File) int64 {
	var n int64
	for _, f := range files {
		n += f.Rows
	}
	return n
}

func TestScanSnapshots(t *testing.T) {
	_, s1, s2, _, meta2 := twoSnapshots(t)
	ctx := context.Background()
	for _, tc := range []struct {
		input string
		snap  int64
		files int
		rows  int64
	}{
		{"iceberg:" + meta2, s2, 6, 150},
		{fmt.Sprintf("iceberg:%s?snapshot=%d", meta2, s1), s1, 4, 100},
		{fmt.Sprintf("iceberg:file://%s?snapshot=%d", meta2, s2), s2, 6, 150},
	} {
		sc, err := iceberg.Opener{}.Scan(ctx, tc.input)
		if err != nil {
			t.Fatalf("%s: %v", tc.input, err)
		}
		if sc.SnapshotID != tc.snap || len(sc.Files) != tc.files || countRows(sc.Files) != tc.rows {
			t.Errorf("%s: snapshot %d, %d files, %d rows; want %d, %d, %d", tc.input, sc.SnapshotID, len(sc.Files), countRows(sc.Files), tc.snap, tc.files, tc.rows)
		}
		for _, f := range sc.Files {
			if strings.HasPrefix(f.Path, "file:") || !filepath.IsAbs(f.Path) {
				t.Errorf("data file path %q: want a local path", f.Path)
			}
		}
	}
	pinned, id, err := iceberg.Opener{}.Pin(ctx, "iceberg:"+meta2)
	if err != nil || id != s2 || pinned != fmt.Sprintf("iceberg:%s?snapshot=%d", meta2, s2) {
		t.Errorf("Pin = %q, %d, %v", pinned, id, err)
	}
	_, err = iceberg.Opener{}.Scan(ctx, "iceberg:"+meta2+"?snapshot=77")
	if !errors.Is(err, iceberg.ErrNoSnapshot) || !strings.Contains(err.Error(), "snapshot 77 is not in the table") {
		t.Errorf("unknown snapshot: %v", err)
	}
}

// prune is what a job with filter f would keep: a stand-in for
// ops.Program.Prune, through the same expr.MayMatch.
func prune(t *testing.T, src string) func(func(string) (expr.Range, bool)) bool {
	t.Helper()
	e, err := expr.Compile(src, expr.Schema{
		{Name: "id", Type: expr.Type{Kind: expr.Int64}}, {Name: "key", Type: expr.Type{Kind: expr.Int64}},
		{Name: "part", Type: expr.Type{Kind: expr.String}}, {Name: "score", Type: expr.Type{Kind: expr.Float64}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return e.MayMatch
}

func TestPrune(t *testing.T) {
	_, _, _, _, meta2 := twoSnapshots(t)
	sc, err := iceberg.Opener{}.Scan(context.Background(), "iceberg:"+meta2)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		filter  string
		kept    int
		skipped int
	}{
		{`part == "c"`, 1, 5},        // identity partition value
		{`part in ("a", "b")`, 4, 2}, // a and b have a file in each snapshot
		{`id >= 100`, 2, 4},          // column statistics: only the second snapshot's files
		{`id < 0`, 0, 6},             // nothing
		{`score > 1000.0`, 0, 6},     // float bounds (the files say: no NaN)
		{`id >= 100 and part == "b"`, 1, 5},
		{`key % 2 == 0`, 6, 0}, // statistics cannot tell
	} {
		kept, skipped := sc.Prune(prune(t, tc.filter))
		if len(kept) != tc.kept || skipped != tc.skipped {
			t.Errorf("%s: kept %d, skipped %d; want %d, %d", tc.filter, len(kept), skipped, tc.kept, tc.skipped)
		}
	}
}

func TestBucketing(t *testing.T) {
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "b"), icebergtest.Layout{Buckets: 8})
	if err != nil {
		t.Fatal(err)
	}
	_, meta, err := tab.Append(rows(0, 200))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := iceberg.Opener{}.Scan(context.Background(), "iceberg:"+meta)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Buckets == nil || *sc.Buckets != (iceberg.Bucketing{Column: "key", N: 8}) || len(sc.Files) != 8 {
		t.Fatalf("bucketing %+v over %d files", sc.Buckets, len(sc.Files))
	}
	seen := map[int]bool{}
	for _, f := range sc.Files {
		if f.Bucket < 0 || f.Bucket >= 8 || seen[f.Bucket] {
			t.Errorf("file %s: bucket %d", f.Path, f.Bucket)
		}
		seen[f.Bucket] = true
	}
}

func icebergtestNew(dir string) (*icebergtest.Table, error) {
	return icebergtest.New(dir, icebergtest.Layout{ByPart: true, Buckets: 4})
}
