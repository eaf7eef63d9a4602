package peer

import (
	"io/fs"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lastmile/lastmile/asuser"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/objstore"
	"github.com/lastmile/lastmile/spec"
)

// TestPeerForgetsJobsCompiledUnderRevokedGrants: a peer keeps a job it
// compiled (its side tables loaded) for the units that follow, of that
// run and of the next run of the same spec by the same user. A grant
// revoked (SIGHUP) stops the next open, but a cached job opens its side
// table no more: its rows were joined into every later unit, a new
// run's included, as if the grant still held. ForgetJobs, which the
// daemon calls when its s3.allow changes, drops them: the next unit
// compiles its job again, its opens checked by the grants now.
func TestPeerForgetsJobsCompiledUnderRevokedGrants(t *testing.T) {
	f := newFixture(t)
	client, r := f.s3Bucket(t, "ctr", "ctr", "ctr/secret")
	text := replaceTable(f.text("revoked"), "inputs: ["+f.data+"]", "inputs: [s3://data/ctr/part-00000.parquet, s3://data/ctr/part-00001.parquet]")
	text = replaceTable(text, filepath.Join(f.data, "part-00002.parquet"), "s3://data/ctr/secret/part-00002.parquet")
	job, err := spec.Parse("", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	mine := objstore.Mount(decode.OSFS{}, client.Source(nil))
	want := f.runAs(job, nil, mine)
	var secret atomic.Bool // the grant of s3://data/ctr/secret/
	secret.Store(true)
	objects := func(c asuser.Cred) decode.FS {
		return client.Source(func(o objstore.Object) error {
			if strings.Contains(o.Key, "secret/") && !secret.Load() {
				return &fs.PathError{Op: "open", Path: o.String(), Err: fs.ErrPermission}
			}
			return nil
		})
	}
	s, addr := f.server(func(s *Server) { s.cfg.Roots, s.cfg.Objects = r, objects })
	pool := f.pool(f.ca.issue("gpu-host"), addr)
	run := func(what string) (spilled int64) {
		t.Helper()
		user := User{UID: 4242, GID: 4242}
		cfg := SpillerConfig{User: &user}
		cfg.Policy.Always = true
		sp, err := NewSpiller(pool, r, text, job, cfg)
		if err != nil {
			t.Fatal(err)
		}
		same(t, what, f.runAs(job, sp, mine), want)
		return sp.Stats().Spilled.Load()
	}
	if n := run("granted"); n == 0 {
		t.Fatal("no unit spilled while the side table's grant held")
	}
	secret.Store(false)
	s.ForgetJobs()
	if n := run("revoked"); n != 0 || s.stats.RefusedPermission.Load() == 0 {
		t.Fatalf("after the side table's grant was revoked: %d units spilled, %d refused for permission; want none spilled, refusals",
			n, s.stats.RefusedPermission.Load())
	}
}
