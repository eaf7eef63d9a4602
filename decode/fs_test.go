package decode

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lastmile/lastmile/column"
)

// TestGlobMatchesFilepath checks glob through an FS against filepath.Glob.
func TestGlobMatchesFilepath(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a/x.parquet", "a/y.parquet", "a/z.txt", "b/c/x.parquet", "b/d.parquet", "[odd]/q.parquet"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), nil, 0o644)
	}
	for _, pat := range []string{"*/*.parquet", "a/*", "*/c/*", "a/[xy].parquet", "b/*.parquet", "nothing/*", "*", "a/x.parquet", "\\[odd\\]/*", "[", "a/[", "*/["} {
		want, werr := filepath.Glob(filepath.Join(dir, pat))
		got, gerr := glob(OSFS{}, filepath.Join(dir, pat))
		if (werr != nil) != (gerr != nil) || !slices.Equal(got, want) {
			t.Errorf("%s: glob %v %v, filepath.Glob %v %v", pat, got, gerr, want, werr)
		}
	}
}

// recordFS is OSFS that records every call and refuses the paths in deny.
type recordFS struct {
	mu    sync.Mutex
	calls []string
	deny  string
}

func (r *recordFS) note(op, name string) error {
	r.mu.Lock()
	r.calls = append(r.calls, op+" "+name)
	r.mu.Unlock()
	if r.deny != "" && strings.HasPrefix(name, r.deny) {
		return &fs.PathError{Op: op, Path: name, Err: fs.ErrPermission}
	}
	return nil
}

func (r *recordFS) Open(name string) (File, error) {
	if err := r.note("open", name); err != nil {
		return nil, err
	}
	return OSFS{}.Open(name)
}

func (r *recordFS) Stat(name string) (fs.FileInfo, error) {
	if err := r.note("stat", name); err != nil {
		return nil, err
	}
	return os.Stat(name)
}

func (r *recordFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := r.note("readdir", name); err != nil {
		return nil, err
	}
	return os.ReadDir(name)
}

// TestPlanAndDecodeThroughFS: planning and the plan's decoders reach files
// only through the plan's FS, and a refusal of the FS is the error.
func TestPlanAndDecodeThroughFS(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.parquet", "b.parquet"} {
		writeFile(t, filepath.Join(dir, name), fileSpec{rows: 300, rowGroupRows: 100, codec: "snappy", pageVersion: 1, pageBytes: 2048})
	}
	rec := &recordFS{}
	plan, err := PlanFiles(context.Background(), []string{dir}, PlanOptions{FS: rec})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"stat " + dir, "readdir " + dir, "open " + filepath.Join(dir, "a.parquet"), "open " + filepath.Join(dir, "b.parquet")}
	got := slices.Clone(rec.calls)
	if len(got) > 2 {
		slices.Sort(got[2:]) // files are planned several at a time: opened in any order
	}
	if !slices.Equal(got, want) {
		t.Fatalf("planning calls %q, want %q (the opens in any order)", rec.calls, want)
	}
	rec.calls = nil
	d := plan.NewDecoder()
	defer d.Close()
	var b column.Batch
	for _, u := range plan.Units {
		if err := d.Decode(context.Background(), u, &b); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.calls) != 2 {
		t.Fatalf("decoding opened %q, want each file once through the FS", rec.calls)
	}

	for _, in := range []string{dir, filepath.Join(dir, "*.parquet"), filepath.Join(dir, "b.parquet")} {
		deny := &recordFS{deny: filepath.Join(dir, "b.parquet")}
		if _, err := PlanFiles(context.Background(), []string{in}, PlanOptions{FS: deny}); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("plan %s with b refused: got %v, want a permission error", in, err)
		}
	}
}

// TestGlobMatchesDirectories: a glob's matched directories are read as
// directory inputs: every *.parquet file under them.
func TestGlobMatchesDirectories(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"dt=1/a.parquet", "dt=1/h=0/b.parquet", "dt=2/c.parquet", "dt=2/notes.txt", "dt=3.parquet", "other/d.parquet"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := expandInputs(context.Background(), OSFS{}, []string{filepath.Join(dir, "dt=*")})
	want := []string{"dt=1/a.parquet", "dt=1/h=0/b.parquet", "dt=2/c.parquet", "dt=3.parquet"}
	for i := range want {
		want[i] = filepath.Join(dir, want[i])
	}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
}

// TestPlanListed: with PlanOptions.Listed, the inputs are files a listing
// found: each is opened by its name and nothing else, a name holding a
// glob character is no pattern, duplicates are planned once, and a name
// no longer there is an error naming it. An object name without the
// ".parquet" suffix, which expanding lists (it may be a prefix), is not
// listed.
func TestPlanListed(t *testing.T) {
	dir := t.TempDir()
	odd, bare := filepath.Join(dir, "a[1].parquet"), filepath.Join(dir, "b")
	for _, p := range []string{odd, bare} {
		writeFile(t, p, fileSpec{rows: 300, rowGroupRows: 100, codec: "snappy", pageVersion: 1, pageBytes: 2048})
	}
	rec := &recordFS{}
	plan, err := PlanFiles(context.Background(), []string{odd, bare, odd}, PlanOptions{FS: rec, Listed: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Files) != 2 || plan.Files[0].Path != odd || plan.Files[1].Path != bare || plan.Rows != 600 {
		t.Fatalf("planned %+v (%d rows), want %s and %s once each", plan.Files, plan.Rows, odd, bare)
	}
	got := slices.Sorted(slices.Values(rec.calls))
	if want := []string{"open " + odd, "open " + bare}; !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("planning calls %q, want only %q", rec.calls, want)
	}
	gone := filepath.Join(dir, "gone.parquet")
	if _, err := PlanFiles(context.Background(), []string{bare, gone}, PlanOptions{Listed: true}); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), gone) {
		t.Fatalf("a listed file no longer there: %v, want fs.ErrNotExist naming %s", err, gone)
	}

	store := &countingListFS{listFS: listFS{names: []string{"mem://b/t/part-0", "mem://b/t/part-1"}}}
	fsys := WithSchemes(nil, map[string]FS{"mem": store})
	names, err := PlanInputs(context.Background(), store.names, PlanOptions{FS: fsys, Listed: true})
	if err != nil || !slices.Equal(names, store.names) || store.lists != 0 {
		t.Fatalf("listed objects: %q, %v, %d listings; want %q and none", names, err, store.lists, store.names)
	}
	if names, err = PlanInputs(context.Background(), []string{"mem://b/t/part-*"}, PlanOptions{FS: fsys}); err != nil || !slices.Equal(names, store.names) || store.lists != 1 {
		t.Fatalf("a glob given by a user: %q, %v, %d listings; want %q and 1", names, err, store.lists, store.names)
	}
}

// countingListFS is listFS counting its listings.
type countingListFS struct {
	listFS
	lists int
}

func (c *countingListFS) List(ctx context.Context, prefix string) ([]string, error) {
	c.lists++
	return c.listFS.List(ctx, prefix)
}
