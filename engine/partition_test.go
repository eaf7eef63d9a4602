package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/lastmile/lastmile/datagen"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/objstore"
	"github.com/lastmile/lastmile/objstore/s3test"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
	"github.com/parquet-go/parquet-go"
)

type hiveRow struct {
	RowID int64   `parquet:"row_id"`
	Score float64 `parquet:"score"`
}

// writeHive writes a table partitioned Hive style by dt and hour, 100
// rows a file, and returns its directory. Row r of date d, hour h has
// row_id d*1000 + h*100 + r. The second date's directory is escaped as
// Spark escapes a ':' in a value.
func writeHive(t testing.TB) string {
	dir := filepath.Join(t.TempDir(), "events")
	for d, dt := range []string{"2026-11-01", "2026-11-02%3A00", "2026-11-03"} {
		for h := range 2 {
			sub := filepath.Join(dir, "dt="+dt, fmt.Sprintf("hour=%d", h))
			if err := os.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			rows := make([]hiveRow, 100)
			for r := range rows {
				rows[r] = hiveRow{RowID: int64(d*1000 + h*100 + r), Score: float64(r) / 100}
			}
			if err := parquet.WriteFile(filepath.Join(sub, "part-0.parquet"), rows); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// hiveRows is what a run's ring gave: each row's row_id, hour and dt.
type hiveRows struct {
	ids, hours []int64
	dts        []string
}

// runHive runs src (RING: the ring directory) and reads its one ring.
func runHive(t *testing.T, src string) (engine.Stats, hiveRows) {
	t.Helper()
	ringDir := t.TempDir()
	var got hiveRows
	st := runConsumed(t, strings.ReplaceAll(src, "RING", ringDir), func(ctx context.Context, ring string) error {
		return readHive(ctx, ringDir, ring, &got)
	})
	return st, got
}

func readHive(ctx context.Context, dir, ring string, got *hiveRows) error {
	ints := func(b *shm.Batch, name string) []int64 {
		v := b.Tensor(name, shm.RoleDense)
		return slices.Clone(unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(v.Data))), b.Rows))
	}
	return eachBatch(ctx, dir, ring, func(b *shm.Batch) {
		got.ids = append(got.ids, ints(b, "row_id")...)
		if b.Tensor("hour", shm.RoleDense) != nil {
			got.hours = append(got.hours, ints(b, "hour")...)
		}
		if v := b.Tensor("dt", shm.RoleValues); v != nil {
			vals := v.Data
			o := b.Tensor("dt", shm.RoleOffsets).Data
			offs := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(o))), b.Rows+1)
			for i := range b.Rows {
				got.dts = append(got.dts, string(vals[offs[i]:offs[i+1]]))
			}
		}
	})
}

// TestHivePartitions: a table partitioned in directories gives its
// partition columns to filters, maps and trainers, and a filter on them
// leaves out the files it rules out, unread; the batches are those of a
// run that reads every file.
func TestHivePartitions(t *testing.T) {
	dir := writeHive(t)
	dates := []string{"2026-11-01", "2026-11-02:00", "2026-11-03"}
	check := func(t *testing.T, got hiveRows, keep func(d, h int) bool) {
		t.Helper()
		var want []int64
		for d := range 3 {
			for h := range 2 {
				for r := range 100 {
					if keep(d, h) {
						want = append(want, int64(d*1000+h*100+r))
					}
				}
			}
		}
		if len(got.ids) != len(want) || len(got.hours) != len(got.ids) || len(got.dts) != len(got.ids) {
			t.Fatalf("%d rows (%d hours, %d dates), want %d", len(got.ids), len(got.hours), len(got.dts), len(want))
		}
		for i, id := range got.ids {
			d, h := int(id/1000), int(id%1000/100)
			if got.hours[i] != int64(h) || got.dts[i] != dates[d] {
				t.Fatalf("row %d: hour %d dt %q, want %d %q", id, got.hours[i], got.dts[i], h, dates[d])
			}
		}
		ids := slices.Clone(got.ids)
		slices.Sort(ids)
		if !slices.Equal(ids, want) {
			t.Fatalf("rows %v..., want %v...", ids[:min(5, len(ids))], want[:min(5, len(want))])
		}
	}
	t.Run("every column", func(t *testing.T) {
		st, got := runHive(t, fmt.Sprintf("inputs: [%s]\npartitions: {dt: string, hour: int64}\nbatch: {size: 64, last: keep}\nring: {dir: RING, name: all}\n", dir))
		check(t, got, func(d, h int) bool { return true })
		if st.UnitsPruned != 0 {
			t.Errorf("%d units pruned with no filter", st.UnitsPruned)
		}
	})
	src := fmt.Sprintf(`
inputs: [%s]
partitions: {dt: string, hour: int64}
batch: {size: 64, last: keep}
seed: 3
shuffle: {units: true, buffer: 128}
ring: {dir: RING, name: filtered}
pipeline:
  - filter: 'dt >= "2026-11-02" and hour == 1 and score >= 0'
  - map: {hour2: "hour * 2"}
  - select: [row_id, hour, dt, hour2]
`, dir)
	job, err := spec.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.Check(context.Background(), job, nil, nil); err != nil {
		t.Fatalf("lastmile check refuses a pipeline over partition columns: %v", err)
	}
	if _, err := engine.EstimateFootprint(context.Background(), job, nil); err != nil {
		t.Fatalf("the daemon's footprint estimate: %v", err)
	}
	keep := func(d, h int) bool { return d >= 1 && h == 1 }
	st, pruned := runHive(t, src)
	check(t, pruned, keep)
	if st.FilesPruned != 4 || st.UnitsPruned != 0 {
		t.Errorf("%d files and %d units pruned, want the 4 files the filter rules out by their directories, unplanned",
			st.FilesPruned, st.UnitsPruned)
	}
	// Reading every file gives the same rows (in another order: the plan
	// has more units to shuffle).
	old := engine.SetNeverPruneForTest(true)
	st, whole := runHive(t, src)
	engine.SetNeverPruneForTest(old)
	check(t, whole, keep)
	if st.FilesPruned != 0 || st.UnitsPruned != 0 {
		t.Errorf("pruning off: %d files and %d units pruned", st.FilesPruned, st.UnitsPruned)
	}
	// A filter no file passes is an error that says so, not a job that
	// hands trainers nothing.
	none := strings.Replace(src, `dt >= "2026-11-02"`, `dt > "2027"`, 1)
	job, err = spec.Parse("test.yaml", []byte(strings.ReplaceAll(none, "RING", t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Run(context.Background(), job, engine.Options{}); err == nil || !strings.Contains(err.Error(), "exclude all 6 input files by their partition values") {
		t.Errorf("a filter no partition passes: %v", err)
	}
}

// openLog is a decode.FS that records the files opened.
type openLog struct {
	decode.OSFS
	mu     sync.Mutex
	opened []string
}

func (o *openLog) Open(name string) (decode.File, error) {
	o.mu.Lock()
	o.opened = append(o.opened, name)
	o.mu.Unlock()
	return o.OSFS.Open(name)
}

// TestHivePartitionsUnopened: the files a filter rules out by their
// partition directories are never opened, footers included, by the run
// or by the daemon's admission of the job, except the first file, whose
// columns the pipeline is compiled against.
func TestHivePartitionsUnopened(t *testing.T) {
	dir := writeHive(t)
	fsys := &openLog{}
	src := fmt.Sprintf("inputs: [%s]\npartitions: {dt: string, hour: int64}\nbatch: {size: 10}\nring: {dir: RINGDIR}\npipeline:\n  - filter: 'hour == 1 and dt == \"2026-11-03\"'\n", dir)
	got := runTensors(t, src, fsys)
	if len(got[0]) != 10 {
		t.Fatalf("%d batches, want 10 (100 rows of one file)", len(got[0]))
	}
	// The daemon's admission of the job (its check and its memory
	// estimate, which open the files as the user) leaves them out too.
	job, err := spec.Parse("test.yaml", []byte(strings.ReplaceAll(src, "RINGDIR", t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.Check(context.Background(), job, nil, fsys); err != nil {
		t.Fatal(err)
	}
	fp, err := engine.EstimateFootprint(context.Background(), job, fsys)
	if err != nil || len(fp.Files) != 1 || fp.Rows != 100 {
		t.Fatalf("footprint: %d files, %d rows, %v; want the one file the filter keeps", len(fp.Files), fp.Rows, err)
	}
	if len(fsys.opened) < 3 {
		t.Fatalf("%d opens: the run, the check and the estimate each open the file they read", len(fsys.opened))
	}
	for _, name := range fsys.opened {
		if rel, _ := filepath.Rel(dir, name); rel != "dt=2026-11-01/hour=0/part-0.parquet" && rel != "dt=2026-11-03/hour=1/part-0.parquet" {
			t.Errorf("opened %s, which the filter rules out", rel)
		}
	}
}

// TestHiveDatePartitions: a partition declared a date is int32 days, as
// DATE columns are: filters compare it with date(...), and the files of
// the days they rule out are left out.
func TestHiveDatePartitions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "events")
	for d, day := range []string{"2026-11-25", "2026-11-26", "2026-11-27"} {
		sub := filepath.Join(dir, "dt="+day)
		os.MkdirAll(sub, 0o755)
		rows := make([]hiveRow, 10)
		for r := range rows {
			rows[r] = hiveRow{RowID: int64(d*100 + r)}
		}
		if err := parquet.WriteFile(filepath.Join(sub, "part-0.parquet"), rows); err != nil {
			t.Fatal(err)
		}
	}
	src := fmt.Sprintf(`
inputs: [%s]
partitions: {dt: date}
batch: {size: 5, last: keep}
ring: {dir: RING, name: days}
pipeline:
  - filter: 'dt >= date("2026-11-26")'
  - map: {hour: "cast(dt - date(\"2026-11-25\"), int64)"}
  - select: [row_id, hour]
`, dir)
	st, got := runHive(t, src)
	if st.FilesPruned != 1 {
		t.Errorf("%d files pruned, want the first day's", st.FilesPruned)
	}
	ids := slices.Clone(got.ids)
	slices.Sort(ids)
	want := []int64{100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 200, 201, 202, 203, 204, 205, 206, 207, 208, 209}
	if !slices.Equal(ids, want) || len(got.hours) != len(got.ids) {
		t.Fatalf("rows %v (%d days since the first), want %v", ids, len(got.hours), want)
	}
	for i, id := range got.ids {
		if got.hours[i] != id/100 {
			t.Fatalf("row %d: %d days after 2026-11-25, want %d", id, got.hours[i], id/100)
		}
	}
}

// TestHivePartitionErrors: a layout that does not match the declared
// partitions fails the plan with an error naming the file and the key.
func TestHivePartitionErrors(t *testing.T) {
	dir := writeHive(t)
	cases := []struct{ name, partitions, columns, want string }{
		{"a key not in the path", "{dt: string, region: string}", "", `partition "region": no directory of the path is named region=VALUE`},
		{"not an int64", "{dt: int64}", "", `partition "dt": value "2026-11-01" is not an int64: declare it a string`},
		{"a key that is a column", "{dt: string, score: string}", "", `partition "score" is also a column of the file`},
		{"only partition columns", "{dt: string}", "columns: [dt]\n", "are all partition columns"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job, err := spec.Parse("test.yaml", []byte(fmt.Sprintf("inputs: [%s]\npartitions: %s\n%sbatch: {size: 64}\nring: {dir: %s}\n", dir, tc.partitions, tc.columns, t.TempDir())))
			if err != nil {
				t.Fatal(err)
			}
			_, err = engine.Run(context.Background(), job, engine.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if tc.columns == "" && !strings.Contains(err.Error(), "dt=2026-11-01") {
				t.Errorf("the error does not name the file: %v", err)
			}
		})
	}
}

// TestHivePartitionsOverS3: the same partitioned table as objects (a
// prefix on the S3 test server) gives the batches it gives as local
// files.
func TestHivePartitionsOverS3(t *testing.T) {
	srv, err := s3test.Start(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	bucket, _ := srv.Bucket("lake")
	local := writeHive(t)
	if err := os.CopyFS(filepath.Join(bucket, "events"), os.DirFS(local)); err != nil {
		t.Fatal(err)
	}
	c, err := objstore.New(objstore.Config{Endpoint: srv.Endpoint, PathStyle: true, AccessKey: s3test.Access, SecretKey: s3test.Secret})
	if err != nil {
		t.Fatal(err)
	}
	const job = `
inputs: [INPUT]
partitions: {hour: int64, dt: string}
batch: {size: 32, last: drop}
seed: 5
shuffle: {units: true, buffer: 64}
ring: {dir: RINGDIR, slots: 4}
pipeline:
  - filter: 'dt != "2026-11-01" or hour == 0'
  - map: {k: "hour + row_id"}
`
	want := runTensors(t, strings.ReplaceAll(job, "INPUT", local), nil)
	got := runTensors(t, strings.ReplaceAll(job, "INPUT", "s3://lake/events/"), objstore.Mount(nil, c.Source(nil)))
	if len(want) != 1 || len(want[0]) != 15 {
		t.Fatalf("the local run gave %d batches, want 15 (500 rows of 32)", len(want[0]))
	}
	if len(got[0]) != len(want[0]) {
		t.Fatalf("%d batches over S3, %d locally", len(got[0]), len(want[0]))
	}
	for i := range want[0] {
		if !bytes.Equal(got[0][i], want[0][i]) {
			t.Fatalf("batch %d differs over S3", i)
		}
	}
}

// BenchmarkHivePlan times a job over a year of daily partitions (365
// small files) whose filter keeps one day: planning every file against
// leaving out, unopened, the files whose directories the filter rules
// out.
func BenchmarkHivePlan(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "events")
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rows := make([]hiveRow, 200)
	for i := range rows {
		rows[i] = hiveRow{RowID: int64(i), Score: float64(i)}
	}
	for d := range 365 {
		sub := filepath.Join(dir, "dt="+day.AddDate(0, 0, d).Format(time.DateOnly))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := parquet.WriteFile(filepath.Join(sub, "part-0.parquet"), rows); err != nil {
			b.Fatal(err)
		}
	}
	src := fmt.Sprintf("inputs: [%s]\npartitions: {dt: string}\nbatch: {size: 100}\nring: {dir: RINGDIR}\npipeline:\n  - filter: 'dt == \"2026-11-27\"'\n", dir)
	for _, tc := range []struct {
		name  string
		never bool
	}{{"every-file", true}, {"pruned", false}} {
		b.Run(tc.name, func(b *testing.B) {
			old := engine.SetNeverPruneForTest(tc.never)
			defer engine.SetNeverPruneForTest(old)
			for b.Loop() {
				if got := runTensors(b, src, nil); len(got[0]) != 2 {
					b.Fatalf("%d batches, want 2", len(got[0]))
				}
			}
		})
	}
}

// TestExampleDaily: examples/ctr-daily.yaml, over a few days of
// generated data laid out as its comment says, checks and keeps only the
// days of its window.
func TestExampleDaily(t *testing.T) {
	root := t.TempDir()
	text, err := os.ReadFile("../examples/ctr-daily.yaml")
	if err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(root, "examples"), 0o755)
	specPath := filepath.Join(root, "examples", "ctr-daily.yaml")
	if err := os.WriteFile(specPath, text, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fixtureConfig(t)
	cfg.Rows, cfg.Files = 3000, 1
	for _, d := range []string{"22", "23", "24", "25"} {
		if _, err := datagen.Write(context.Background(), filepath.Join(root, "out", "ctr-daily", "dt=2026-11-"+d), cfg); err != nil {
			t.Fatal(err)
		}
	}
	job, err := spec.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.Check(context.Background(), job, nil, nil); err != nil {
		t.Fatalf("lastmile check of the example: %v", err)
	}
	fp, err := engine.EstimateFootprint(context.Background(), job, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(fp.Files) != 2 || !strings.Contains(fp.Files[0], "dt=2026-11-24") || !strings.Contains(fp.Files[1], "dt=2026-11-25") {
		t.Errorf("the example plans %q, want the two days of its window", fp.Files)
	}
}
