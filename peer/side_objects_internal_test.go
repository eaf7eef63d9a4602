package peer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lastmile/lastmile/asuser"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/objstore"
	"github.com/lastmile/lastmile/spec"
)

// sideObjectsJob is the anti join of the object part-00001 against
// table (an object, a prefix or a glob beneath s3://data/ctr/side/,
// which holds part-00002 at first): no key in common, so the join keeps
// every row until a table of half the input's keys comes.
func (f *fixture) sideObjectsJob(t *testing.T, table string) (*spec.Job, string) {
	t.Helper()
	return f.antiJoin(t, "objrecheck", 1, 500, table, "s3://data/ctr/part-00001.parquet")
}

// putHalfKeys writes, beneath the bucket, the object key holding every
// other key of the input part-00001 (written aside, then renamed: the
// store's object is replaced at once, as a PUT does).
func (f *fixture) putHalfKeys(t *testing.T, key string) {
	t.Helper()
	dst := filepath.Join(f.bucket, "data", key)
	tmp := filepath.Join(f.bucket, "half.tmp")
	writeHalfKeys(t, filepath.Join(f.data, "part-00001.parquet"), tmp)
	if err := os.Chmod(tmp, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}

// TestPeerRechecksCachedSideObjects: a peer's cached job checks its side
// tables in object storage again, as it does its files: an object
// replaced under its key (another size, Last-Modified or ETag), and an
// object added beneath a prefix or glob the table names, make the job
// compile again, so that the units it computes join the table as the
// requester, running them itself, would. Before, the objects were never
// checked: the peer joined the table it had loaded into every unit of
// every later run, silently other rows than the requester's.
func TestPeerRechecksCachedSideObjects(t *testing.T) {
	setSideRecheck(t, 0) // every unit checks: no wait for the bound
	for _, c := range []struct {
		name, table string
		change      string // the key written with half the input's keys
	}{
		{"object replaced", "s3://data/ctr/side/part-00002.parquet", "ctr/side/part-00002.parquet"},
		{"prefix gains an object", "s3://data/ctr/side/", "ctr/side/half.parquet"},
		{"glob gains an object", "s3://data/ctr/side/*.parquet", "ctr/side/half.parquet"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			client, r := f.s3Bucket(t, "ctr", "ctr", "ctr/side")
			job, text := f.sideObjectsJob(t, c.table)
			mine := objstore.Mount(decode.OSFS{}, client.Source(nil))
			objects := func(asuser.Cred) decode.FS { return client.Source(nil) }
			s, addr := f.server(func(s *Server) { s.cfg.Roots, s.cfg.Objects = r, objects })
			pool := f.pool(f.ca.issue("gpu-host"), addr)
			run := func(what string) {
				t.Helper()
				want := f.runAs(job, nil, mine)
				user := User{UID: 4242, GID: 4242}
				cfg := SpillerConfig{User: &user}
				cfg.Policy.Always = true
				sp, err := NewSpiller(pool, r, text, job, cfg)
				if err != nil {
					t.Fatal(err)
				}
				same(t, what, f.runAs(job, sp, mine), want)
				if sp.Stats().Spilled.Load() == 0 {
					t.Fatalf("%s: no unit spilled (%d failures on the peer)", what, s.stats.Failures.Load())
				}
			}
			run("the first table")
			f.putHalfKeys(t, c.change)
			run("after " + c.name + " (a peer joining the table it loaded keeps every row)")
		})
	}
}
