package roots_test

import (
	"errors"
	"testing"

	"github.com/lastmile/lastmile/roots"
)

func TestObjectRoots(t *testing.T) {
	dir := t.TempDir()
	r, err := roots.New(map[string]string{"ctr": "s3://data/ctr", "logs": "s3://data/logs/", "local": dir})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	url := func(name, want string, wantOK bool) {
		t.Helper()
		got, ok, err := r.URL(name)
		if err != nil || ok != wantOK || got != want {
			t.Fatalf("URL(%q) = %q, %v, %v; want %q, %v", name, got, ok, err, want, wantOK)
		}
	}
	url("ctr/day=1/a.parquet", "s3://data/ctr/day=1/a.parquet", true)
	url("logs/x.parquet", "s3://data/logs/x.parquet", true)
	url("ctr", "s3://data/ctr/", true)
	url("local/a.parquet", "", false)
	for _, bad := range []string{"ctr/../secret/a.parquet", "/ctr/a", "nope/a.parquet"} {
		if _, _, err := r.URL(bad); err == nil {
			t.Errorf("URL(%q) accepted", bad)
		}
	}
	locate := func(p, want string, wantOK bool) {
		t.Helper()
		got, ok := r.Locate(p)
		if ok != wantOK || got != want {
			t.Fatalf("Locate(%q) = %q, %v; want %q, %v", p, got, ok, want, wantOK)
		}
	}
	locate("s3://data/ctr/day=1/a.parquet", "ctr/day=1/a.parquet", true)
	locate("s3://data/ctr-other/a.parquet", "", false)
	locate("s3://data/ctr/../x", "", false)
	locate("s3://other/ctr/a.parquet", "", false)
	locate(dir+"/a.parquet", "local/a.parquet", true)
	if _, err := r.Open("ctr/a.parquet"); !errors.Is(err, roots.ErrObjectRoot) {
		t.Fatalf("Open beneath an object root: %v, want ErrObjectRoot", err)
	}
	for _, bad := range []string{"s3://", "s3://data/a/../b", "://x"} {
		if _, err := roots.New(map[string]string{"x": bad}); err == nil {
			t.Errorf("root %q accepted", bad)
		}
	}
}
