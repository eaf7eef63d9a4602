package iceberg_test

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/iceberg/icebergtest"
)

// deletedOf returns each data file's deleted positions in a scan, by the
// file's location as the test table writer gives it.
func deletedOf(t *testing.T, meta string) (map[string][]int64, int64) {
	t.Helper()
	sc, err := iceberg.Opener{}.Scan(context.Background(), "iceberg:"+meta)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]int64{}
	for _, f := range sc.Files {
		if f.Deleted != nil {
			out["file://"+f.Path] = f.Deleted
		}
	}
	return out, sc.DeletedRows
}

// TestPositionDeletes: a snapshot's position deletes give each data file
// its deleted rows, sorted and without repeats; rows naming files outside
// the snapshot are ignored, a delete older than a data file does not
// touch it, and deletes stay with later snapshots.
func TestPositionDeletes(t *testing.T) {
	tab, _, s2, _, _ := twoSnapshots(t)
	files := tab.DataFiles() // 0..3 in snapshot 1 (sequence 1), 4 and 5 in snapshot 2
	_, meta3, err := tab.DeletePositions([]icebergtest.Position{
		{File: files[4], Pos: 24}, {File: files[0], Pos: 3}, {File: files[0], Pos: 3}, {File: files[0], Pos: 0},
		{File: "file:///elsewhere/compacted-away.parquet", Pos: 1},
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, n := deletedOf(t, meta3)
	want := map[string][]int64{files[0]: {0, 3}, files[4]: {24}}
	if fmt.Sprint(got) != fmt.Sprint(want) || n != 3 {
		t.Fatalf("deleted %v (%d rows); want %v (3 rows)", got, n, want)
	}
	// Sequence number 1: older than files 4 and 5, not than files 0..3.
	_, meta4, err := tab.DeletePositions([]icebergtest.Position{{File: files[5], Pos: 0}, {File: files[1], Pos: 7}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, n = deletedOf(t, meta4)
	want[files[1]] = []int64{7}
	if fmt.Sprint(got) != fmt.Sprint(want) || n != 4 {
		t.Fatalf("with an old delete: %v (%d rows); want %v (4 rows)", got, n, want)
	}
	// Later appends keep the deletes; the snapshot before them has none.
	_, meta5, err := tab.Append(rows(150, 10))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ = deletedOf(t, meta5); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after an append: %v; want %v", got, want)
	}
	sc, err := iceberg.Opener{}.Scan(context.Background(), fmt.Sprintf("iceberg:%s?snapshot=%d", meta5, s2))
	if err != nil || sc.DeletedRows != 0 {
		t.Fatalf("snapshot before the deletes: %d deleted, %v", sc.DeletedRows, err)
	}
	paths := iceberg.Deletes([]iceberg.Input{{Scan: sc}})
	if paths != nil {
		t.Errorf("Deletes of a snapshot without: %v", paths)
	}
}

// TestDeletesRefused: deletes lastmile does not apply, and broken ones,
// refuse the snapshot with what to do; earlier snapshots still read.
func TestDeletesRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		del  func(tab *icebergtest.Table) (int64, string, error)
		want []string
	}{
		{"a position past the file's end", func(tab *icebergtest.Table) (int64, string, error) {
			return tab.DeletePositions([]icebergtest.Position{{File: tab.DataFiles()[2], Pos: 25}}, 0)
		}, []string{"delete file", "deletes row 25 of", "which has 25 rows"}},
		{"a negative position", func(tab *icebergtest.Table) (int64, string, error) {
			return tab.DeletePositions([]icebergtest.Position{{File: tab.DataFiles()[2], Pos: -1}}, 0)
		}, []string{"deletes row -1 of"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab, s1, _, _, _ := twoSnapshots(t)
			s3, meta3, err := tc.del(tab)
			if err != nil {
				t.Fatal(err)
			}
			_, err = iceberg.Opener{}.Scan(context.Background(), "iceberg:"+meta3)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("snapshot %d: ", s3)) {
				t.Fatalf("scan: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if _, err := (iceberg.Opener{}).Scan(context.Background(), fmt.Sprintf("iceberg:%s?snapshot=%d", meta3, s1)); err != nil {
				t.Errorf("snapshot before the deletes: %v", err)
			}
		})
	}
}

// TestDeletesByPath: Deletes maps the files' paths (what units name) to
// their positions.
func TestDeletesByPath(t *testing.T) {
	tab, _, _, _, _ := twoSnapshots(t)
	files := tab.DataFiles()
	_, meta, err := tab.DeletePositions([]icebergtest.Position{{File: files[3], Pos: 9}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := iceberg.Opener{}.Scan(context.Background(), "iceberg:"+meta)
	if err != nil {
		t.Fatal(err)
	}
	got := iceberg.Deletes([]iceberg.Input{{Scan: sc}, {Plain: "/x.parquet"}})
	path := strings.TrimPrefix(files[3], "file://")
	if len(got) != 1 || !slices.Equal(got[path], []int64{9}) {
		t.Errorf("Deletes: %v; want %s: [9]", got, path)
	}
}

// TestEqualityDeletes: equality deletes become positions in the data
// files of their partition with a lower sequence number, merged with
// their position deletes, for the files asked about only.
func TestEqualityDeletes(t *testing.T) {
	tab, _, _, _, _ := twoSnapshots(t)
	files := tab.DataFiles() // 0..3 parts a..d (ids 0..99 by id%4, sequence 1); 4, 5 parts a, b (ids 100..149, sequence 2)
	// Partition a: ids 0 and 4 (file 0, rows 0 and 1), 100 and 102 (file
	// 4, rows 0 and 1); id 1 is in partition b, untouched.
	if _, _, err := tab.DeleteEquality("a", "id", []int64{0, 4, 100, 102, 1, 7777}, 0); err != nil {
		t.Fatal(err)
	}
	// Sequence 1: no data file of partition b is older.
	if _, _, err := tab.DeleteEquality("b", "id", []int64{1, 101}, 1); err != nil {
		t.Fatal(err)
	}
	// A string column: every row of partition c.
	if _, _, err := tab.DeleteEquality("c", "part", []string{"c"}, 0); err != nil {
		t.Fatal(err)
	}
	_, meta, err := tab.DeletePositions([]icebergtest.Position{{File: files[0], Pos: 9}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := iceberg.Opener{}.Scan(context.Background(), "iceberg:"+meta)
	if err != nil {
		t.Fatal(err)
	}
	local := func(i int) string { return strings.TrimPrefix(files[i], "file://") }
	all := []string{local(0), local(1), local(2), local(3), local(4), local(5)}
	got, err := iceberg.EqualityDeleted(context.Background(), nil, []iceberg.Input{{Scan: sc}}, all)
	if err != nil {
		t.Fatal(err)
	}
	every := make([]int64, 25)
	for i := range every {
		every[i] = int64(i)
	}
	want := map[string][]int64{local(0): {0, 1, 9}, local(4): {0, 1}, local(2): every}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("equality deletes:\n%v\nwant\n%v", got, want)
	}
	// Only the files asked about are read.
	got, err = iceberg.EqualityDeleted(context.Background(), nil, []iceberg.Input{{Scan: sc}}, all[3:5])
	if err != nil || fmt.Sprint(got) != fmt.Sprint(map[string][]int64{local(4): {0, 1}}) {
		t.Fatalf("for files 3 and 4: %v, %v", got, err)
	}
}

// TestEqualityDeletesFloat: a float equality delete matches as Iceberg's
// Java reader does (Comparator.naturalOrder): every NaN matches every
// NaN whatever its payload, and -0.0 does not match 0.0.
func TestEqualityDeletesFloat(t *testing.T) {
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "f"), icebergtest.Layout{})
	if err != nil {
		t.Fatal(err)
	}
	nanA, nanB, nanC := math.Float64frombits(0x7ff8000000000001), math.Float64frombits(0xfff0000000000abc), math.NaN()
	scores := []float64{1.5, nanA, math.Copysign(0, -1), 0, 2.5, nanB, 1.5, math.Inf(1), 4}
	data := make([]icebergtest.Row, len(scores))
	for i, sc := range scores {
		data[i] = icebergtest.Row{ID: int64(i), Part: "a", Key: int64(i), Score: sc}
	}
	if _, _, err := tab.Append(data); err != nil {
		t.Fatal(err)
	}
	_, meta, err := tab.DeleteEquality("a", "score", []float64{1.5, nanC, 0, math.Inf(1), 7}, 0)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := iceberg.Opener{}.Scan(context.Background(), "iceberg:"+meta)
	if err != nil {
		t.Fatal(err)
	}
	file := sc.Files[0].Path
	got, err := iceberg.EqualityDeleted(context.Background(), nil, []iceberg.Input{{Scan: sc}}, []string{file})
	if err != nil {
		t.Fatal(err)
	}
	// 1.5 twice, both NaNs, 0.0 (not -0.0), +Inf.
	if want := []int64{0, 1, 3, 5, 6, 7}; fmt.Sprint(got[file]) != fmt.Sprint(want) {
		t.Fatalf("deleted %v, want %v", got, want)
	}
}

// TestDeletionVectors: a format 3 table's deletion vectors give their
// data files' deleted rows, merged with position deletes; one older than
// its data file is not applied, and a corrupt one fails the scan.
func TestDeletionVectors(t *testing.T) {
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "v3"), icebergtest.Layout{ByPart: true, FormatVersion: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tab.Append(rows(0, 100)); err != nil { // files 0..3, 25 rows each, sequence 1
		t.Fatal(err)
	}
	files := tab.DataFiles()
	if _, _, err := tab.DeleteVector(files[1], []int64{24, 0, 7}, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tab.DeletePositions([]icebergtest.Position{{File: files[1], Pos: 3}, {File: files[2], Pos: 5}}, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tab.Append(rows(100, 4)); err != nil { // file 4, part a, sequence 4
		t.Fatal(err)
	}
	newer := tab.DataFiles()[4]
	_, meta, err := tab.DeleteVector(newer, []int64{0}, 1) // older than the file: not applied
	if err != nil {
		t.Fatal(err)
	}
	got, n := deletedOf(t, meta)
	want := map[string][]int64{files[1]: {0, 3, 7, 24}, files[2]: {5}}
	if fmt.Sprint(got) != fmt.Sprint(want) || n != 5 {
		t.Fatalf("deleted %v (%d rows); want %v (5 rows)", got, n, want)
	}
	// A flipped byte of a blob fails its CRC.
	dvs, _ := filepath.Glob(filepath.Join(tab.Dir, "data", "dv-*.puffin"))
	b, err := os.ReadFile(dvs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[12] ^= 0xff
	os.WriteFile(dvs[0], b, 0o644)
	_, err = iceberg.Opener{}.Scan(context.Background(), "iceberg:"+meta)
	if err == nil || !strings.Contains(err.Error(), "deletion vector in") {
		t.Fatalf("scan with a corrupt deletion vector: %v", err)
	}
}

// statsFS is decode.OSFS counting the Stat calls of each name.
type statsFS struct {
	decode.OSFS
	mu    sync.Mutex
	stats map[string]int
}

func (s *statsFS) Stat(name string) (fs.FileInfo, error) {
	s.mu.Lock()
	s.stats[name]++
	s.mu.Unlock()
	return s.OSFS.Stat(name)
}

// TestDeleteFilesPlannedByName: the delete files a snapshot's manifests
// name, and the data files equality deletes are matched against, are
// planned by their names (decode.PlanOptions.Listed), not expanded as a
// user's input is: not stated, and on an object store not listed, as a
// name without the ".parquet" suffix was (it might be a prefix).
func TestDeleteFilesPlannedByName(t *testing.T) {
	tab, _, _, _, _ := twoSnapshots(t)
	files := tab.DataFiles()
	if _, _, err := tab.DeleteEquality("a", "id", []int64{0, 4}, 0); err != nil {
		t.Fatal(err)
	}
	_, meta, err := tab.DeletePositions([]icebergtest.Position{{File: files[0], Pos: 9}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	fsys := &statsFS{stats: map[string]int{}}
	sc, err := iceberg.Opener{FS: fsys}.Scan(context.Background(), "iceberg:"+meta)
	if err != nil {
		t.Fatal(err)
	}
	data := strings.TrimPrefix(files[0], "file://")
	got, err := iceberg.EqualityDeleted(context.Background(), fsys, []iceberg.Input{{Scan: sc}}, []string{data})
	if err != nil || fmt.Sprint(got) != fmt.Sprint(map[string][]int64{data: {0, 1, 9}}) {
		t.Fatalf("deleted %v, %v; want rows 0, 1 and 9 of %s", got, err, data)
	}
	for name, n := range fsys.stats {
		if strings.HasSuffix(name, ".parquet") {
			t.Errorf("%s stated %d times", name, n)
		}
	}
}
