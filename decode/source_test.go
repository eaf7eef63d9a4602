package decode

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// listFS is an object store of names only: a Lister for "mem://".
type listFS struct {
	OSFS
	names []string
}

func (l listFS) Owns(name string) bool { return strings.HasPrefix(name, "mem://") }

func (l listFS) List(_ context.Context, prefix string) ([]string, error) {
	var out []string
	for _, n := range l.names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out, nil
}

func TestExpandObjects(t *testing.T) {
	store := listFS{names: []string{
		"mem://b/t/a.parquet", "mem://b/t/b.parquet", "mem://b/t/notes.txt",
		"mem://b/t/day=1/c.parquet", "mem://b/t/day=2/d.parquet", "mem://b/t2/e.parquet",
		"mem://b/one.parquet",
	}}
	fsys := WithSchemes(nil, map[string]FS{"mem": store})
	f := func(in string, want ...string) {
		t.Helper()
		got, err := expandInputs(context.Background(), fsys, []string{in})
		if len(want) == 0 {
			if err == nil {
				t.Fatalf("%s: got %q, want an error", in, got)
			}
			return
		}
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s: got %q, %v; want %q", in, got, err, want)
		}
	}
	f("mem://b/t/*.parquet", "mem://b/t/a.parquet", "mem://b/t/b.parquet")
	f("mem://b/t/day=*/*.parquet", "mem://b/t/day=1/c.parquet", "mem://b/t/day=2/d.parquet")
	// A glob matching directories reads the *.parquet objects under them.
	f("mem://b/t/day=*", "mem://b/t/day=1/c.parquet", "mem://b/t/day=2/d.parquet")
	f("mem://b/t*", "mem://b/t/a.parquet", "mem://b/t/b.parquet", "mem://b/t/day=1/c.parquet", "mem://b/t/day=2/d.parquet", "mem://b/t2/e.parquet")
	f("mem://b/t/day=[2]", "mem://b/t/day=2/d.parquet")
	f("mem://b/t/", "mem://b/t/a.parquet", "mem://b/t/b.parquet", "mem://b/t/day=1/c.parquet", "mem://b/t/day=2/d.parquet")
	f("mem://b/t", "mem://b/t/a.parquet", "mem://b/t/b.parquet", "mem://b/t/day=1/c.parquet", "mem://b/t/day=2/d.parquet")
	f("mem://b/one.parquet", "mem://b/one.parquet")
	f("mem://b/missing")
	f("mem://b/t/zz.parquet", "mem://b/t/zz.parquet") // named: opened, not listed
	f("mem://b/t/[")
	if _, err := expandInputs(context.Background(), fsys, []string{"gs://b/x"}); !errors.Is(err, ErrNoScheme) {
		t.Fatalf("unknown scheme: %v, want ErrNoScheme", err)
	}
	if _, err := fsys.Open("mem://b/none"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open through the scheme's FS: %v", err)
	}
}

// prefetchFile records the ranges a Decoder announces.
type prefetchFile struct {
	File
	got *[]Range
}

func (p prefetchFile) Prefetch(r []Range) { *p.got = append(*p.got, r...) }

type prefetchFS struct {
	OSFS
	got *[]Range
}

func (p prefetchFS) Open(name string) (File, error) {
	f, err := p.OSFS.Open(name)
	if err != nil {
		return nil, err
	}
	return prefetchFile{f, p.got}, nil
}

// TestDecoderPrefetches: a remote file is told the unit's projected
// ranges before any read, and a decode through it matches the local one.
func TestDecoderPrefetches(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.parquet"), fileSpec{rows: 300, rowGroupRows: 100, codec: "snappy", pageVersion: 1, pageBytes: 2048})
	var got []Range
	plan, err := PlanFiles(context.Background(), []string{dir}, PlanOptions{Columns: []string{"row_id"}, FS: prefetchFS{got: &got}})
	if err != nil {
		t.Fatal(err)
	}
	d := plan.NewDecoder()
	defer d.Close()
	u := plan.Units[0]
	if err := d.Open(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	c := u.Chunks[0]
	want := Range{Off: c.Offset, Len: c.End - c.Offset}
	if len(got) == 0 || got[len(got)-1] != want {
		t.Fatalf("prefetched %v, want the row_id chunk %v last", got, want)
	}
}
