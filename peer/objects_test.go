package peer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/roots"
)

// urlFS serves "s3://data/..." URLs from a local directory, recording them.
type urlFS struct {
	decode.OSFS
	dir  string
	seen []string
}

func (u *urlFS) Open(name string) (decode.File, error) {
	u.seen = append(u.seen, name)
	return u.OSFS.Open(filepath.Join(u.dir, strings.TrimPrefix(name, "s3://data/")))
}

// TestRootsFSObjects: a ticket's name beneath an object-store root is read
// by its URL through the object store, and cannot climb out of the root.
func TestRootsFSObjects(t *testing.T) {
	local, bucket := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(bucket, "ctr"), 0o755)
	os.WriteFile(filepath.Join(bucket, "ctr/a.parquet"), []byte("object"), 0o644)
	os.WriteFile(filepath.Join(local, "b.parquet"), []byte("file"), 0o644)
	r, err := roots.New(map[string]string{"ctr": "s3://data/ctr", "loc": local})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	objs := &urlFS{dir: bucket}
	f := rootsFS{r: r, objects: objs}
	for name, want := range map[string]string{"ctr/a.parquet": "object", "loc/b.parquet": "file"} {
		file, err := f.Open(name)
		if err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
		b := make([]byte, len(want))
		file.ReadAt(b, 0)
		file.Close()
		if string(b) != want {
			t.Fatalf("%s read %q, want %q", name, b, want)
		}
	}
	if len(objs.seen) != 1 || objs.seen[0] != "s3://data/ctr/a.parquet" {
		t.Fatalf("object store asked for %q", objs.seen)
	}
	if _, err := f.Open("ctr/../x.parquet"); !errors.Is(err, roots.ErrOutside) {
		t.Fatalf("climbing out of an object root: %v, want ErrOutside", err)
	}
	if _, err := (rootsFS{r: r}).Open("ctr/a.parquet"); !errors.Is(err, roots.ErrObjectRoot) {
		t.Fatalf("no object store: %v, want ErrObjectRoot", err)
	}
}
