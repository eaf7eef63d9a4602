package engine_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/objstore"
	"github.com/lastmile/lastmile/objstore/s3test"
	"github.com/lastmile/lastmile/spec"
)

// countingLister is an object store Source that counts its listings.
type countingLister struct {
	*objstore.Source
	lists atomic.Int64
}

func (c *countingLister) List(ctx context.Context, prefix string) ([]string, error) {
	c.lists.Add(1)
	return c.Source.List(ctx, prefix)
}

// TestTableBesideAPrefixListsItOnce: a job reading an Iceberg table and a
// plain object prefix lists the prefix as often as a job reading the
// prefix alone. The check that no data file of the table is also named
// by the prefix (sharedDataFiles) uses the planner's listing; it listed
// the prefix once more itself, a second round of LIST requests for a
// prefix of many objects.
func TestTableBesideAPrefixListsItOnce(t *testing.T) {
	srv := startS3(t)
	tab, meta := deletesTableEq(t, func(int64) bool { return false })
	p, _ := tab.Locate(9)
	file := strings.TrimPrefix(p.File, "file://")
	// A copy of a data file is another object: the prefix shares no file
	// with the table.
	bucket, _ := srv.Bucket("lake")
	putObjects(t, filepath.Join(bucket, "plain"), []string{file})
	if _, err := os.Stat(filepath.Join(bucket, "plain", filepath.Base(file))); err != nil {
		t.Fatal(err)
	}
	c, err := objstore.New(objstore.Config{Endpoint: srv.Endpoint, PathStyle: true, AccessKey: s3test.Access, SecretKey: s3test.Secret})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"columns: [id, key]\n", "pipeline:\n  - filter: {expr: 'key != 99'}\n  - select: [id]\n"} {
		lists := func(inputs string) int64 {
			t.Helper()
			src := &countingLister{Source: c.Source(nil)}
			fsys := decode.WithSchemes(nil, map[string]decode.FS{objstore.Scheme: src})
			job := fmt.Sprintf("inputs: [%s]\nbatch: {size: 64, last: keep}\nring: {dir: RINGDIR, slots: 64}\n%s", inputs, body)
			runTensors(t, job, fsys)
			return src.lists.Load()
		}
		alone := lists(`"s3://lake/plain/"`)
		both := lists(fmt.Sprintf(`"s3://lake/plain/", "iceberg:%s"`, meta))
		t.Logf("%q: %d listings alone, %d beside the table", body, alone, both)
		if alone == 0 || both != alone {
			t.Errorf("%q: the prefix listed %d times beside a table, %d alone", body, both, alone)
		}
	}
}

// TestTableBesideADirectoryWithGlobCharacters: a plain input's files
// beside a table are planned by the names its listing found, and a name
// holding a glob character ('[', '*', '?') is a file, not a pattern. A
// directory of "part[1].parquet" listed it, then the planner read that
// name as the glob "part1.parquet", matched nothing and left the file's
// rows out without a word.
func TestTableBesideADirectoryWithGlobCharacters(t *testing.T) {
	tab, meta := deletesTableEq(t, func(int64) bool { return false })
	p, _ := tab.Locate(9)
	file := strings.TrimPrefix(p.File, "file://")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	plain := t.TempDir()
	if err := os.WriteFile(filepath.Join(plain, "part[1].parquet"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	rows := func(inputs string) int {
		t.Helper()
		dir := t.TempDir()
		src := fmt.Sprintf("inputs: [%s]\nbatch: {size: 64, last: keep}\nring: {dir: %q, name: t, slots: 4}\ncolumns: [id, key]\n", inputs, dir)
		_, out := runRowsStats(t, src, dir)
		return len(out["id"])
	}
	alone, table := rows(fmt.Sprintf("%q", plain)), rows(fmt.Sprintf("%q", "iceberg:"+meta))
	if alone == 0 {
		t.Fatal("the directory alone read no rows")
	}
	if both := rows(fmt.Sprintf("%q, %q", plain, "iceberg:"+meta)); both != alone+table {
		t.Fatalf("the directory beside the table: %d rows; want %d (%d of the directory, %d of the table)", both, alone+table, alone, table)
	}
}

// TestObjectsWithoutSuffixListedOnce: a glob matching objects whose names
// do not end in ".parquet" is listed once by a run and once by each of
// a job's admission checks (Check, EstimateFootprint), beside an
// Iceberg table or alone, with or without a pipeline, and with a
// pipeline that leaves out partitions. The planner planned the names it
// had listed by expanding each again, and a name without the suffix may
// be a prefix: one more LIST request per object.
func TestObjectsWithoutSuffixListedOnce(t *testing.T) {
	srv := startS3(t)
	tab, meta := deletesTableEq(t, func(int64) bool { return false })
	p, _ := tab.Locate(9)
	data, err := os.ReadFile(strings.TrimPrefix(p.File, "file://"))
	if err != nil {
		t.Fatal(err)
	}
	bucket, _ := srv.Bucket("lake")
	for i := range 3 {
		dir := filepath.Join(bucket, "plain", fmt.Sprintf("dt=%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%d", i)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := objstore.New(objstore.Config{Endpoint: srv.Endpoint, PathStyle: true, AccessKey: s3test.Access, SecretKey: s3test.Secret})
	if err != nil {
		t.Fatal(err)
	}
	const glob = `"s3://lake/plain/dt=*/part-*"`
	table := fmt.Sprintf(`%s, "iceberg:%s"`, glob, meta)
	columns, pipeline := "columns: [id, key]\n", "pipeline:\n  - filter: {expr: 'key != 99'}\n  - select: [id]\n"
	partitions := "partitions: {dt: int64}\npipeline:\n  - filter: {expr: 'dt != 1'}\n  - select: [id]\n"
	for _, tc := range []struct{ inputs, body string }{
		{glob, columns}, {table, columns}, {glob, pipeline}, {table, pipeline}, {glob, partitions},
	} {
		src := &countingLister{Source: c.Source(nil)}
		fsys := decode.WithSchemes(nil, map[string]decode.FS{objstore.Scheme: src})
		job := fmt.Sprintf("inputs: [%s]\nbatch: {size: 64, last: keep}\nring: {dir: RINGDIR, slots: 64}\n%s", tc.inputs, tc.body)
		runTensors(t, job, fsys)
		n := src.lists.Load()
		parsed, err := spec.Parse("t.yaml", []byte(strings.ReplaceAll(job, "RINGDIR", t.TempDir())))
		if err != nil {
			t.Fatal(err)
		}
		src.lists.Store(0)
		if err := engine.Check(context.Background(), parsed, nil, fsys); err != nil {
			t.Fatal(err)
		}
		if _, err := engine.EstimateFootprint(context.Background(), parsed, fsys); err != nil {
			t.Fatal(err)
		}
		admission := src.lists.Load()
		t.Logf("inputs %s, %q: %d listings by the run, %d by admission", tc.inputs, tc.body, n, admission)
		if n != 1 || admission != 2 {
			t.Errorf("inputs %s, %q: the glob of 3 objects listed %d times by the run, %d by admission (Check, EstimateFootprint); want once each", tc.inputs, tc.body, n, admission)
		}
	}
}

// statCounter is a decode.FS that counts the Stat calls of each name.
type statCounter struct {
	decode.OSFS
	mu    sync.Mutex
	stats map[string]int
}

func (s *statCounter) Stat(name string) (fs.FileInfo, error) {
	s.mu.Lock()
	s.stats[filepath.Clean(name)]++
	s.mu.Unlock()
	return s.OSFS.Stat(name)
}

// TestLocalFilesStatedOnce: the files of a local plain input are stated
// at most once each by planning, beside an Iceberg table (where the
// check for files shared with the table needs their identity) or alone,
// with or without a pipeline; a table's data files too. The planner
// expanded the names the listing had found, stating each again.
func TestLocalFilesStatedOnce(t *testing.T) {
	tab, meta := deletesTableEq(t, func(int64) bool { return false })
	p, _ := tab.Locate(9)
	table := strings.TrimPrefix(p.File, "file://")
	data, err := os.ReadFile(table)
	if err != nil {
		t.Fatal(err)
	}
	plain := t.TempDir()
	var files []string
	for i := range 3 {
		f := filepath.Join(plain, fmt.Sprintf("part-%d.parquet", i))
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	for _, body := range []string{"columns: [id, key]\n", "pipeline:\n  - filter: {expr: 'key != 99'}\n  - select: [id]\n"} {
		for _, inputs := range []string{fmt.Sprintf("%q", plain), fmt.Sprintf("%q, %q", plain, "iceberg:"+meta)} {
			fsys := &statCounter{stats: map[string]int{}}
			job := fmt.Sprintf("inputs: [%s]\nbatch: {size: 64, last: keep}\nring: {dir: RINGDIR, slots: 64}\n%s", inputs, body)
			runTensors(t, job, fsys)
			t.Logf("inputs %s, %q: stats of the files %d %d %d, of the table's %d", inputs, body, fsys.stats[files[0]], fsys.stats[files[1]], fsys.stats[files[2]], fsys.stats[table])
			for _, f := range append(files, table) {
				if n := fsys.stats[f]; n > 1 {
					t.Errorf("inputs %s, %q: %s stated %d times; want at most 1", inputs, body, f, n)
				}
			}
		}
	}
}

// TestListedPlanAsExpanded: a job's input files planned as listed
// (engine.InputPlan's options, decode.PlanOptions.Listed in a job with a
// table) give the plan that expanding each name again gave before
// Listed: the same files in the same order, cut into the same units,
// whatever plain inputs stand beside the table (a directory, a glob, a
// file another input reaches too) and in whatever order. A checkpoint
// taken with the earlier build resumes on the same units.
func TestListedPlanAsExpanded(t *testing.T) {
	tab, meta := deletesTableEq(t, func(int64) bool { return false })
	p, _ := tab.Locate(9)
	data, err := os.ReadFile(strings.TrimPrefix(p.File, "file://"))
	if err != nil {
		t.Fatal(err)
	}
	plain := t.TempDir()
	for _, f := range []string{"b/p-2.parquet", "a/p-1.parquet", "a/p-0.parquet", "b/c/p-3.parquet"} {
		f = filepath.Join(plain, f)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	table := "iceberg:" + meta
	for _, inputs := range [][]string{
		{table},
		{plain, table},
		{table, plain + "/b", plain + "/a/p-1.parquet"},
		{plain + "/*/p-*.parquet", table, plain},
		{plain + "/b/c/p-3.parquet", plain, table, table},
	} {
		quoted := make([]string, len(inputs))
		for i, in := range inputs {
			quoted[i] = strconv.Quote(in)
		}
		job, err := spec.Parse("t.yaml", []byte(fmt.Sprintf("inputs: [%s]\nbatch: {size: 64}\ndecode: {max_unit_rows: 60}\n", strings.Join(quoted, ", "))))
		if err != nil {
			t.Fatal(err)
		}
		paths, opts, err := engine.InputPlan(context.Background(), job, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !opts.Listed {
			t.Fatalf("%q: the files of a job with a table are not planned as listed", inputs)
		}
		listed, err := decode.PlanFiles(context.Background(), paths, opts)
		if err != nil {
			t.Fatal(err)
		}
		opts.Listed = false
		expanded, err := decode.PlanFiles(context.Background(), paths, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(listed.Files, expanded.Files) || !reflect.DeepEqual(listed.Units, expanded.Units) || len(listed.Units) < 2 {
			t.Errorf("%q: %d units as listed, %d expanded again; files %v and %v", inputs, len(listed.Units), len(expanded.Units), listed.Files, expanded.Files)
		}
	}
}

// TestPipelineOverADirectoryWithGlobCharacters: a job with a pipeline
// plans the files its directory input listed by their names: a file
// "part[1].parquet" beside "part1.parquet" is read, as a job without a
// pipeline and the job's admission read it. The pipeline's planning read
// the name as the glob "part1.parquet", which matched the other file,
// read once, and the first file's rows were left out without a word.
func TestPipelineOverADirectoryWithGlobCharacters(t *testing.T) {
	tab, _ := deletesTableEq(t, func(int64) bool { return false })
	p, _ := tab.Locate(9)
	data, err := os.ReadFile(strings.TrimPrefix(p.File, "file://"))
	if err != nil {
		t.Fatal(err)
	}
	plain := t.TempDir()
	for _, name := range []string{"part[1].parquet", "part1.parquet"} {
		if err := os.WriteFile(filepath.Join(plain, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rows := func(body string) int {
		t.Helper()
		dir := t.TempDir()
		src := fmt.Sprintf("inputs: [%q]\nbatch: {size: 64, last: keep}\nring: {dir: %q, name: t, slots: 4}\n%s", plain, dir, body)
		_, out := runRowsStats(t, src, dir)
		return len(out["id"])
	}
	whole, piped := rows("columns: [id, key]\n"), rows("pipeline:\n  - filter: {expr: 'key != 99'}\n  - select: [id]\n")
	if whole == 0 || piped != whole {
		t.Fatalf("the directory's files: %d rows through a pipeline, %d without; want the same", piped, whole)
	}
}
