package roots_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/roots"
)

func setup(t *testing.T) (*roots.Roots, string) {
	t.Helper()
	base := t.TempDir()
	ctr := filepath.Join(base, "ctr")
	for _, p := range []string{"ctr/day=1/a.parquet", "ctr/b.parquet", "secret/s.parquet", "ctr2/c.parquet"} {
		os.MkdirAll(filepath.Join(base, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(base, p), []byte(p), 0o644)
	}
	links := map[string]string{
		"ctr/abs-out":     filepath.Join(base, "secret/s.parquet"),
		"ctr/rel-out":     "../secret/s.parquet",
		"ctr/dir-out":     "../secret",
		"ctr/inside":      "day=1/a.parquet",
		"ctr/day=1/up":    "../b.parquet",
		"ctr/proc":        "/proc/self/root/etc/hostname",
		"ctr/sibling-out": "../ctr2/c.parquet",
	}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(base, l)); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(ctr, "fifo.d"), 0o755)
	r, err := roots.New(map[string]string{"ctr": ctr, "ctr2": filepath.Join(base, "ctr2")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, base
}

func TestOpenBeneath(t *testing.T) {
	r, _ := setup(t)
	for _, c := range []struct {
		name, want string
		err        error // nil: opens and reads want
	}{
		{"ctr/b.parquet", "ctr/b.parquet", nil},
		{"ctr/day=1/a.parquet", "ctr/day=1/a.parquet", nil},
		{"ctr/./day=1/../b.parquet", "", roots.ErrOutside}, // ".." refused as text, even inside
		{"ctr/inside", "ctr/day=1/a.parquet", nil},
		{"ctr/day=1/up", "ctr/b.parquet", nil}, // a link that climbs but stays beneath
		{"ctr2/c.parquet", "ctr2/c.parquet", nil},
		{"ctr/../secret/s.parquet", "", roots.ErrOutside},
		{"ctr//etc/passwd", "", roots.ErrOutside},
		{"ctr/abs-out", "", roots.ErrOutside},
		{"ctr/rel-out", "", roots.ErrOutside},
		{"ctr/dir-out/s.parquet", "", roots.ErrOutside},
		{"ctr/sibling-out", "", roots.ErrOutside}, // another root is outside this one
		{"ctr/proc", "", roots.ErrOutside},
		{"nope/x.parquet", "", roots.ErrUnknownRoot},
		{"ctr/missing.parquet", "", fs.ErrNotExist},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := r.Open(c.name)
			if c.err != nil {
				if f != nil {
					f.Close()
				}
				if !errors.Is(err, c.err) {
					t.Fatalf("got %v, want %v", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			b := make([]byte, 64)
			n, _ := f.Read(b)
			if string(b[:n]) != c.want {
				t.Fatalf("read %q, want %q", b[:n], c.want)
			}
		})
	}
}

func TestSplitAndNames(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"ctr/a", true}, {"ctr", true}, {"ctr/", true}, {"/ctr/a", false}, {".x/a", false}, {"", false},
		{"c t/a", false}, {"ctr/a/../../b", false}, {"ctr/a\x00b", false}, {"ctr/..", false},
	} {
		if _, _, err := roots.Split(c.name); (err == nil) != c.ok {
			t.Errorf("Split(%q): %v, want ok=%v", c.name, err, c.ok)
		}
	}
	if _, err := roots.New(map[string]string{"ctr": "relative/dir"}); err == nil {
		t.Error("a relative root directory was accepted")
	}
	if _, err := roots.New(map[string]string{"../x": "/tmp"}); err == nil {
		t.Error("a root name with '/' was accepted")
	}
}

func TestLocate(t *testing.T) {
	r, base := setup(t)
	for _, c := range []struct{ path, want string }{
		{filepath.Join(base, "ctr/day=1/a.parquet"), "ctr/day=1/a.parquet"},
		{filepath.Join(base, "ctr2/c.parquet"), "ctr2/c.parquet"}, // not "ctr" by prefix
		{filepath.Join(base, "secret/s.parquet"), ""},
		{filepath.Join(base, "ctr"), ""},
		{filepath.Join(base, "ctr/../secret/s.parquet"), ""},
	} {
		got, ok := r.Locate(c.path)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("Locate(%s) = %q %v, want %q", c.path, got, ok, c.want)
		}
	}
}

func TestStatReadDir(t *testing.T) {
	r, _ := setup(t)
	if st, err := r.Stat("ctr/day=1"); err != nil || !st.IsDir() {
		t.Fatalf("Stat dir: %v %v", st, err)
	}
	if _, err := r.Stat("ctr/dir-out"); !errors.Is(err, roots.ErrOutside) {
		t.Fatalf("Stat through a link out: %v", err)
	}
	ents, err := r.ReadDir("ctr/day=1")
	if err != nil || len(ents) != 2 || ents[0].Name() != "a.parquet" {
		t.Fatalf("ReadDir: %v %v", ents, err)
	}
	if _, err := r.ReadDir("ctr/dir-out"); !errors.Is(err, roots.ErrOutside) {
		t.Fatalf("ReadDir through a link out: %v", err)
	}
	if _, err := r.Open("ctr/fifo.d"); err == nil {
		t.Fatal("a directory opened as a file")
	}
}

func FuzzSplit(f *testing.F) {
	for _, s := range []string{"ctr/a.parquet", "ctr/../x", "/abs", "ctr//x", "a/b/c/../../d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		root, rel, err := roots.Split(name)
		if err != nil {
			return
		}
		if roots.ValidName(root) != nil || rel == "" || rel[0] == '/' || strings.IndexByte(rel, 0) >= 0 {
			t.Fatalf("Split(%q) accepted root %q rel %q", name, root, rel)
		}
		for _, el := range strings.Split(rel, "/") {
			if el == ".." {
				t.Fatalf("Split(%q) accepted '..'", name)
			}
		}
	})
}
