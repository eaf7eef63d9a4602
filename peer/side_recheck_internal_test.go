package peer

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lastmile/lastmile/roots"
	"github.com/lastmile/lastmile/spec"
)

// sideRecheckFixture is a fixture whose data root bob (65534) may
// reach, holding his side table (a copy of part-00002, 0644, his), and
// an anti join of part-00001 against it: no key in common, so the join
// keeps every row. It returns the fixture, the table's path, the job
// and its text.
func sideRecheckFixture(t *testing.T) (*fixture, string, *spec.Job, string) {
	t.Helper()
	f := newBobFixture(t)
	side := filepath.Join(f.data, "side.parquet")
	copyAs(t, filepath.Join(f.data, "part-00002.parquet"), side, bobUID)
	job, text := f.antiJoin(t, "recheck", 2, 50, side, filepath.Join(f.data, "part-00001.parquet"))
	return f, side, job, text
}

const bobUID = 65534

// setSideRecheck sets sideRecheck for the test.
func setSideRecheck(t *testing.T, d time.Duration) {
	old := sideRecheck
	sideRecheck = d
	t.Cleanup(func() { sideRecheck = old })
}

// spillAsBob runs job (the GPU host reading as the daemon: it loaded
// the table before any change) with its units spilled to addr for bob,
// and returns its batches and the units spilled.
func (f *fixture) spillAsBob(t *testing.T, addr, text string, job *spec.Job) ([][][32]byte, int64) {
	t.Helper()
	cfg := SpillerConfig{User: &User{UID: bobUID, GID: bobUID}}
	cfg.Policy.Always = true
	sp, err := NewSpiller(f.pool(f.ca.issue("gpu-host"), addr), f.roots, text, job, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := f.run(job, sp)
	return got, sp.Stats().Spilled.Load()
}

// TestPeerRechecksCachedSideTables: a peer keeps a compiled job, its
// side table loaded, for the next runs of its spec by the same user, and
// asks the kernel again, as that user, whether they may still open the
// table (and whether it is the same file) before the job serves more
// units. Before, a chmod that took bob's access to his table away went
// unseen for as long as the job stayed cached: the peer went on joining
// it into his next runs' units; and a table replaced by another file of
// the same name was joined as it had been.
func TestPeerRechecksCachedSideTables(t *testing.T) {
	setSideRecheck(t, 0) // every unit checks: no wait for the bound
	t.Run("chmod", func(t *testing.T) {
		f, side, job, text := sideRecheckFixture(t)
		want := f.run(job, nil)
		s, addr := f.server(func(s *Server) { s.cfg.TrustRoot = false })
		got, spilled := f.spillAsBob(t, addr, text, job)
		same(t, "bob's job, his table readable", got, want)
		if spilled == 0 {
			t.Fatal("no unit of bob's readable job spilled")
		}
		if err := os.Chmod(side, 0); err != nil {
			t.Fatal(err)
		}
		got, spilled = f.spillAsBob(t, addr, text, job)
		same(t, "bob's job after his table's chmod 0", got, want)
		if refused := s.stats.RefusedPermission.Load(); spilled != 0 || refused == 0 {
			t.Fatalf("after chmod 0 of bob's table: %d units spilled, %d refused for permission; want none spilled (the cached job joined a table bob may no longer open)", spilled, refused)
		}
	})
	t.Run("replaced", func(t *testing.T) {
		f, side, job, text := sideRecheckFixture(t)
		s, addr := f.server(func(s *Server) { s.cfg.TrustRoot = false })
		first := f.run(job, nil)
		got, spilled := f.spillAsBob(t, addr, text, job)
		same(t, "bob's job, his first table", got, first)
		// bob replaces his table by one holding every other key of his
		// input: the anti join now drops half the rows.
		next := side + ".new"
		writeHalfKeys(t, filepath.Join(f.data, "part-00001.parquet"), next)
		if err := os.Chown(next, bobUID, bobUID); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(next, side); err != nil {
			t.Fatal(err)
		}
		want := f.run(job, nil)
		got, spilled = f.spillAsBob(t, addr, text, job)
		same(t, "bob's job after he replaced his table (a peer joining the old one keeps every row)", got, want)
		if spilled == 0 {
			t.Fatalf("no unit spilled after the table was replaced (refused %d)", s.stats.RefusedPermission.Load())
		}
	})
}

// TestCachedSideTablesCheckedAtMostOncePerBound: within sideRecheck of
// its last check, a cached job serves its units without a check (no
// system call per unit); the first unit after it checks once.
func TestCachedSideTablesCheckedAtMostOncePerBound(t *testing.T) {
	setSideRecheck(t, time.Hour)
	f, _, job, text := sideRecheckFixture(t)
	s, addr := f.server(nil)
	if _, spilled := f.spillAsBob(t, addr, text, job); spilled < 2 {
		t.Fatalf("%d units spilled, want several", spilled)
	}
	files := s.jobs.onlyFiles(t)
	if n := files.checks.Load(); n != 0 {
		t.Fatalf("%d checks of the side tables within the bound, want none", n)
	}
	if len(files.files) != 1 {
		t.Fatalf("the compile recorded %v, want the side table alone", files.files)
	}
	sideRecheck = 0
	if _, spilled := f.spillAsBob(t, addr, text, job); spilled == 0 {
		t.Fatal("no unit spilled once the bound had passed")
	}
	if n := files.checks.Load(); n == 0 {
		t.Fatal("no check of the side tables once the bound had passed")
	}
}

// onlyFiles returns the side files of the cache's one job.
func (c *jobCache) onlyFiles(t *testing.T) *sideFiles {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byKey) != 1 {
		t.Fatalf("%d jobs cached, want 1", len(c.byKey))
	}
	for _, j := range c.byKey {
		return j.files
	}
	return nil
}

// BenchmarkSideFilesFresh is what a unit of a cached job pays for the
// check in the steady state of a run: a read of the monotonic clock and
// of an atomic, no system call.
func BenchmarkSideFilesFresh(b *testing.B) {
	b.ReportAllocs()
	s := newSideFiles(rootsFS{user: Self()}, "")
	s.seal()
	for b.Loop() {
		if _, err := s.fresh(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSideFilesCheck is what one check of a job with one side
// table file costs, read as another user: the unit that comes after the
// bound pays it.
func BenchmarkSideFilesCheck(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root to read as another uid")
	}
	dir := b.TempDir()
	os.Chmod(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, "side.parquet"), []byte("x"), 0o644); err != nil {
		b.Fatal(err)
	}
	r, err := roots.New(map[string]string{"data": dir})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	fsys := rootsFS{r: r, user: User{UID: bobUID, GID: bobUID}}
	fsys.side = newSideFiles(fsys, "")
	f, err := fsys.Open("data/side.parquet")
	if err != nil {
		b.Fatal(err)
	}
	f.Close()
	fsys.side.seal()
	old := sideRecheck
	sideRecheck = 0
	defer func() { sideRecheck = old }()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fsys.side.fresh(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
