package decode

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// dirStore is an object store (Lister) of the files under a local
// directory: "mem://b/KEY" is the file root/KEY.
type dirStore struct{ root string }

func (d dirStore) local(name string) string {
	return filepath.Join(d.root, strings.TrimPrefix(name, "mem://b/"))
}

func (d dirStore) Owns(name string) bool { return strings.HasPrefix(name, "mem://") }

func (d dirStore) List(_ context.Context, prefix string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(d.root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(d.root, p)
		if n := "mem://b/" + filepath.ToSlash(rel); strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

func (d dirStore) Open(name string) (File, error)             { return OSFS{}.Open(d.local(name)) }
func (d dirStore) Stat(name string) (fs.FileInfo, error)      { return os.Stat(d.local(name)) }
func (d dirStore) ReadDir(name string) ([]fs.DirEntry, error) { return nil, fs.ErrInvalid }

// TestPlanListedAsExpanded: the files a set of inputs expands to,
// planned as listed (PlanOptions.Listed), give the plan the inputs give:
// the same files, in the same order, cut into the same units, whichever
// inputs name a file twice (the first is kept) and whatever the kind of
// input (a directory, a glob matching files or directories, a file, an
// object prefix, a glob of objects without the ".parquet" suffix, an
// object without it). Planning those names without Listed, as the engine
// did before it had Listed, gives that plan too: a checkpoint taken with
// an earlier build resumes on the same units.
func TestPlanListedAsExpanded(t *testing.T) {
	dir := t.TempDir()
	spec := fileSpec{rows: 300, rowGroupRows: 100, codec: "snappy", pageVersion: 1, pageBytes: 2048}
	for i, f := range []string{"l/b/p-2.parquet", "l/a/p-1.parquet", "l/a/p-0.parquet", "l/b/c/p-3.parquet", "l/notes.txt",
		"s/dt=1/part-1", "s/dt=0/part-0", "s/dt=2/part-2", "s/e.parquet", "s/dt=2/f.parquet"} {
		spec.first = int64(i) * 1000
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, spec)
	}
	fsys := WithSchemes(nil, map[string]FS{"mem": dirStore{filepath.Join(dir, "s")}})
	l := filepath.Join(dir, "l")
	for _, inputs := range [][]string{
		{l},
		{l + "/a/p-*.parquet", l},
		{l, l + "/a/p-0.parquet"},
		{l + "/b/c/p-3.parquet", l, l + "/a"},
		{l + "/*", l + "/b"},
		{"mem://b/"},
		{"mem://b/dt=*/part-*"},
		{"mem://b/dt=0/part-0", "mem://b/dt=*/part-*", "mem://b/"},
		{"mem://b/dt=*", l + "/a", "mem://b/e.parquet"},
	} {
		opts := PlanOptions{FS: fsys, MaxUnitRows: 60}
		want, err := PlanFiles(context.Background(), inputs, opts)
		if err != nil {
			t.Fatalf("%q: %v", inputs, err)
		}
		names, err := PlanInputs(context.Background(), inputs, opts)
		if err != nil {
			t.Fatalf("%q: %v", inputs, err)
		}
		again, err := PlanFiles(context.Background(), names, opts)
		if err != nil {
			t.Fatalf("%q expanded: %v", inputs, err)
		}
		opts.Listed = true
		listed, err := PlanFiles(context.Background(), names, opts)
		if err != nil {
			t.Fatalf("%q listed: %v", inputs, err)
		}
		for _, got := range []struct {
			how  string
			plan *Plan
		}{{"listed", listed}, {"expanded again", again}} {
			if !reflect.DeepEqual(got.plan.Files, want.Files) || !reflect.DeepEqual(got.plan.Units, want.Units) {
				t.Errorf("%q: the plan of the files %s differs from the inputs' plan:\n%v\nwant\n%v", inputs, got.how, filesOf(got.plan), filesOf(want))
			}
		}
	}
}

func filesOf(p *Plan) []string {
	var out []string
	for _, f := range p.Files {
		out = append(out, f.Path)
	}
	return out
}
