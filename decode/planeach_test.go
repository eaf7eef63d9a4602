package decode

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// slowFS is OSFS with a delay before every open and read, as an object
// store's round trips: a path's delay comes from its name, so that files
// finish out of order.
type slowFS struct {
	OSFS
	delay time.Duration
}

type slowFile struct {
	File
	delay time.Duration
}

func (s slowFS) wait(name string) time.Duration {
	h := fnv.New32a()
	h.Write([]byte(name))
	return s.delay * time.Duration(1+h.Sum32()%4) / 2
}

func (s slowFS) Open(name string) (File, error) {
	d := s.wait(name)
	time.Sleep(d)
	f, err := s.OSFS.Open(name)
	if err != nil {
		return nil, err
	}
	return slowFile{f, d}, nil
}

func (f slowFile) ReadAt(p []byte, off int64) (int, error) {
	time.Sleep(f.delay)
	return f.File.ReadAt(p, off)
}

// manyFiles writes n small files into a new directory and returns it.
func manyFiles(t testing.TB, n int) string {
	dir := t.TempDir()
	for i := range n {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("part-%03d.parquet", i)),
			fileSpec{rows: int64(50 + i*7), rowGroupRows: 40, first: int64(i * 1000), codec: "snappy", pageVersion: 1 + i%2})
	}
	return dir
}

func withPlanParallel(n int) func() {
	old := planParallel
	planParallel = n
	return func() { planParallel = old }
}

// TestPlanParallelSameAsSerial: planning files at once gives the plan
// that planning them one by one gives, unit for unit, whatever order
// they finish in; and the same error, that of the first file in order.
func TestPlanParallelSameAsSerial(t *testing.T) {
	dir := manyFiles(t, 40)
	fsys := slowFS{delay: time.Millisecond}
	plan := func(n int, opts PlanOptions) (string, error) {
		defer withPlanParallel(n)()
		opts.FS = fsys
		p, err := PlanFiles(context.Background(), []string{dir}, opts)
		if err != nil {
			return "", err
		}
		b, _ := json.Marshal(p)
		return string(b), nil
	}
	for _, opts := range []PlanOptions{{}, {Columns: []string{"row_id"}, MaxUnitRows: 15}} {
		serial, err := plan(1, opts)
		if err != nil {
			t.Fatal(err)
		}
		parallel, err := plan(16, opts)
		if err != nil {
			t.Fatal(err)
		}
		if parallel != serial {
			t.Fatalf("%+v: the plan made 16 files at a time differs from the one made file by file", opts)
		}
	}
	// Two corrupt files: the error is the first one's, either way.
	for _, i := range []int{31, 12} {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%03d.parquet", i)), []byte("PAR1 not a footer PAR1"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []int{1, 16} {
		if _, err := plan(n, PlanOptions{}); err == nil || !strings.Contains(err.Error(), "part-012.parquet") {
			t.Errorf("%d at a time: %v, want the error of part-012.parquet", n, err)
		}
	}
}

// BenchmarkPlanLatency plans 64 files through a file system that takes
// 2 to 4 ms a request, about an object store's round trip: one file at a
// time against planParallel at once.
func BenchmarkPlanLatency(b *testing.B) {
	dir := manyFiles(b, 64)
	fsys := slowFS{delay: 2 * time.Millisecond}
	for _, n := range []int{1, planParallel} {
		b.Run(fmt.Sprintf("parallel-%d", n), func(b *testing.B) {
			defer withPlanParallel(n)()
			for b.Loop() {
				if _, err := PlanFiles(context.Background(), []string{dir}, PlanOptions{FS: fsys}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
