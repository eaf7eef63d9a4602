package peer

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/spec"
)

const sideBuckets = 4

// bucketRecheckFixture is sideRecheckFixture for a bucket join: an
// input and bob's side table (his, 0644), both laid out as bucket=B
// directories of bucket[4](key), and a left join of the two declared as
// a bucket join, whose peer loads each bucket's file when a unit first
// needs it, after the compile. It returns the fixture, the side table's
// files by bucket, the job and its text.
func bucketRecheckFixture(t *testing.T) (*fixture, []string, *spec.Job, string) {
	t.Helper()
	f := newBobFixture(t)
	type inRow struct {
		ID  int64 `parquet:"id"`
		Key int64 `parquet:"key"`
	}
	type sideRow struct {
		Key  int64 `parquet:"key"`
		Feat int64 `parquet:"feat"`
	}
	in := make([][]inRow, sideBuckets)
	side := make([][]sideRow, sideBuckets)
	for id := range int64(2000) {
		k := id % 500
		b := iceberg.BucketInt(sideBuckets, k)
		in[b] = append(in[b], inRow{ID: id, Key: k})
		if id < 500 && k%2 == 0 {
			side[b] = append(side[b], sideRow{Key: k, Feat: k * 10})
		}
	}
	var sides []string
	for b := range sideBuckets {
		dir := filepath.Join(f.data, "in", fmt.Sprintf("bucket=%d", b))
		sdir := filepath.Join(f.data, "bside", fmt.Sprintf("bucket=%d", b))
		for _, d := range []string{dir, sdir} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := parquet.WriteFile(filepath.Join(dir, "part-0.parquet"), in[b], parquet.MaxRowsPerRowGroup(100)); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(sdir, "part-0.parquet")
		if err := parquet.WriteFile(p, side[b]); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, bobUID, bobUID); err != nil {
			t.Fatal(err)
		}
		sides = append(sides, p)
	}
	text := fmt.Sprintf(`version: 1
name: bucketrecheck
inputs: [%s]
batch: {size: 50, last: keep}
epochs: 1
seed: 1
ring: {slots: 4, dir: %s}
decode: {max_unit_rows: 100, workers: 1}
pipeline:
  - join: {kind: left, table: %s, on: key, columns: [feat], buckets: %d}
`, filepath.Join(f.data, "in"), f.shm, filepath.Join(f.data, "bside"), sideBuckets)
	job, err := spec.Parse("", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return f, sides, job, text
}

// TestPeerRechecksLazyBucketFiles: a bucket join's files, which a peer
// loads bucket by bucket as its units need them, after the compile, are
// checked again as the compile's files are: the compile plans every
// bucket's files (their footers, as the user), so each is recorded
// (sideFiles), and a chmod that takes bob's access to one bucket's file
// away, after the peer loaded that bucket, stops the peer joining it
// within the bound; a file replaced under its name is joined as it is
// now.
func TestPeerRechecksLazyBucketFiles(t *testing.T) {
	setSideRecheck(t, 0) // every unit checks: no wait for the bound
	for _, c := range []struct {
		name   string
		change func(t *testing.T, f *fixture, file string)
		denied bool
	}{
		{"chmod", func(t *testing.T, _ *fixture, file string) {
			if err := os.Chmod(file, 0); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"replaced", func(t *testing.T, f *fixture, file string) {
			type sideRow struct {
				Key  int64 `parquet:"key"`
				Feat int64 `parquet:"feat"`
			}
			var rows []sideRow // every key of the bucket, another feat
			for k := range int64(500) {
				if iceberg.BucketInt(sideBuckets, k) == 1 {
					rows = append(rows, sideRow{Key: k, Feat: -k})
				}
			}
			next := file + ".new"
			if err := parquet.WriteFile(next, rows); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(next, bobUID, bobUID); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(next, file); err != nil {
				t.Fatal(err)
			}
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, sides, job, text := bucketRecheckFixture(t)
			s, addr := f.server(func(s *Server) { s.cfg.TrustRoot = false })
			want := f.run(job, nil)
			got, spilled := f.spillAsBob(t, addr, text, job)
			same(t, "bob's bucket join", got, want)
			if spilled == 0 {
				t.Fatal("no unit of bob's bucket join spilled")
			}
			files := s.jobs.onlyFiles(t)
			files.mu.Lock()
			for _, p := range sides {
				name, _ := f.roots.Locate(p)
				if _, ok := files.files[name]; !ok {
					t.Errorf("the compile recorded %v; want every bucket's file, %s among them", files.files, name)
				}
			}
			files.mu.Unlock()
			if m := s.jobs.onlyJob(t).up.SideMemory(); m <= 0 {
				t.Fatalf("the cached job holds %d bytes of side tables: want its buckets loaded", m)
			}
			c.change(t, f, sides[1])
			want = f.run(job, nil)
			got, spilled = f.spillAsBob(t, addr, text, job)
			same(t, "bob's bucket join after his bucket's file changed", got, want)
			refused := s.stats.RefusedPermission.Load()
			switch {
			case c.denied && (spilled != 0 || refused == 0):
				t.Fatalf("after chmod 0 of a bucket's file: %d units spilled, %d refused for permission; want none spilled", spilled, refused)
			case !c.denied && spilled == 0:
				t.Fatalf("no unit spilled after a bucket's file was replaced (refused %d)", refused)
			}
		})
	}
}

// onlyJob returns the cache's one job.
func (c *jobCache) onlyJob(t *testing.T) *cachedJob {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byKey) != 1 {
		t.Fatalf("%d jobs cached, want 1", len(c.byKey))
	}
	for _, j := range c.byKey {
		return j
	}
	return nil
}
