package peer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lastmile/lastmile/spec"
)

// sideDirFixture is sideRecheckFixture with bob's side table a
// directory, data/side, holding side.parquet (part-00002's keys, none in
// common with the input) and the tables of extra (every other key of the
// input), and the job naming it as table(dir).
func sideDirFixture(t *testing.T, table func(dir string) string, extra ...string) (*fixture, string, *spec.Job, string) {
	t.Helper()
	f, side, _, _ := sideRecheckFixture(t)
	dir := filepath.Join(f.data, "side")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	copyAs(t, side, filepath.Join(dir, "side.parquet"), bobUID)
	for _, name := range extra {
		f.writeHalfAs(t, filepath.Join(dir, name))
	}
	job, text := f.antiJoin(t, "dirrecheck", 1, 250, table(dir), filepath.Join(f.data, "part-00001.parquet"))
	return f, dir, job, text
}

// writeHalfAs writes to path every other key of the input part-00001,
// 0644 and bob's.
func (f *fixture) writeHalfAs(t *testing.T, path string) {
	t.Helper()
	tmp := path + ".tmp"
	writeHalfKeys(t, filepath.Join(f.data, "part-00001.parquet"), tmp)
	if err := os.Chmod(tmp, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, bobUID, bobUID); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestPeerRechecksCachedSideListings: a side table named as a directory
// or a glob is the files it expands to, and a cached job's check expands
// it again: a file added, removed or renamed since the compile makes the
// job compile again. Before, only the files the compile had opened were
// checked: a file added beside them went unseen, and the peer joined the
// table without its rows (a renamed file, one it had read, was seen as
// removed, but a new name it had not was not).
func TestPeerRechecksCachedSideListings(t *testing.T) {
	setSideRecheck(t, 0) // every unit checks: no wait for the bound
	isDir := func(dir string) string { return dir }
	isGlob := func(dir string) string { return filepath.Join(dir, "*.parquet") }
	for _, c := range []struct {
		name   string
		table  func(dir string) string
		extra  []string // files of half the keys at first
		change func(t *testing.T, f *fixture, dir string)
	}{
		{"directory gains a file", isDir, nil, func(t *testing.T, f *fixture, dir string) {
			f.writeHalfAs(t, filepath.Join(dir, "half.parquet"))
		}},
		{"glob gains a file", isGlob, nil, func(t *testing.T, f *fixture, dir string) {
			f.writeHalfAs(t, filepath.Join(dir, "half.parquet"))
		}},
		{"directory loses a file", isDir, []string{"half.parquet"}, func(t *testing.T, f *fixture, dir string) {
			if err := os.Remove(filepath.Join(dir, "half.parquet")); err != nil {
				t.Fatal(err)
			}
		}},
		{"glob file renamed out", isGlob, []string{"half.parquet"}, func(t *testing.T, f *fixture, dir string) {
			if err := os.Rename(filepath.Join(dir, "half.parquet"), filepath.Join(dir, "half.parquet.old")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, dir, job, text := sideDirFixture(t, c.table, c.extra...)
			s, addr := f.server(func(s *Server) { s.cfg.TrustRoot = false })
			got, spilled := f.spillAsBob(t, addr, text, job)
			same(t, "bob's job, his first table", got, f.run(job, nil))
			if spilled == 0 {
				t.Fatal("no unit of bob's job spilled")
			}
			c.change(t, f, dir)
			want := f.run(job, nil)
			got, spilled = f.spillAsBob(t, addr, text, job)
			same(t, "bob's job after "+c.name, got, want)
			if spilled == 0 {
				t.Fatalf("no unit spilled after %s (refused %d, failures %d)", c.name, s.stats.RefusedPermission.Load(), s.stats.Failures.Load())
			}
		})
	}
}
