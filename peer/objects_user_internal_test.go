package peer

import (
	"io/fs"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lastmile/lastmile/asuser"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/objstore"
	"github.com/lastmile/lastmile/spec"
)

// TestPeerObjectsAsUser: a peer reads the objects beneath its
// object-store roots with its own credentials, so a ticket's user (the
// requester's word, after the root squash) is checked by
// ServerConfig.Objects before anything is read: a granted user's units,
// side table included, are computed by the peer; another user's are
// refused with PermissionDenied, counted as permission refusals, and the
// requester runs that job's units itself, with the same batches. Root,
// squashed, is checked as nobody.
func TestPeerObjectsAsUser(t *testing.T) {
	f := newFixture(t)
	client, r := f.s3Bucket(t, "ctr", "ctr", "ctr")
	// The fixture's job, its inputs and its side table in the bucket.
	text := replaceTable(f.text("objjob"), "inputs: ["+f.data+"]", "inputs: [s3://data/ctr/part-00000.parquet, s3://data/ctr/part-00001.parquet]")
	text = replaceTable(text, filepath.Join(f.data, "part-00002.parquet"), "s3://data/ctr/part-00002.parquet")
	job, err := spec.Parse("", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	mine := objstore.Mount(decode.OSFS{}, client.Source(nil))
	want := f.runAs(job, nil, mine)
	const granted = 4242
	var mu sync.Mutex
	var asked []uint32
	objects := func(c asuser.Cred) decode.FS {
		mu.Lock()
		asked = append(asked, c.UID)
		mu.Unlock()
		return client.Source(func(o objstore.Object) error {
			if c.UID == granted {
				return nil
			}
			return &fs.PathError{Op: "open", Path: o.String(), Err: fs.ErrPermission}
		})
	}
	for _, c := range []struct {
		name  string
		user  User
		trust bool
		ok    bool
		as    uint32
	}{
		{"granted", User{UID: granted, GID: granted}, false, true, granted},
		{"not granted", User{UID: 4243, GID: 4243}, false, false, 4243},
		{"root squashed", User{UID: 0, GID: 0}, false, false, Nobody.UID},
	} {
		t.Run(c.name, func(t *testing.T) {
			asked = nil
			s, addr := f.server(func(s *Server) { s.cfg.Roots, s.cfg.Objects, s.cfg.TrustRoot = r, objects, c.trust })
			cfg := SpillerConfig{User: &c.user}
			cfg.Policy.Always = true
			sp, err := NewSpiller(f.pool(f.ca.issue("gpu-host"), addr), r, text, job, cfg)
			if err != nil {
				t.Fatal(err)
			}
			same(t, c.name, f.runAs(job, sp, mine), want)
			spilled, refused := sp.Stats().Spilled.Load(), s.stats.RefusedPermission.Load()
			if c.ok && (spilled == 0 || refused != 0) {
				t.Fatalf("%d units spilled, %d refused; want all spilled", spilled, refused)
			}
			if !c.ok && (spilled != 0 || refused == 0 || s.stats.Failures.Load() != 0) {
				t.Fatalf("%d units spilled, %d refused for permission, %d failures; want none spilled, refusals counted as permission",
					spilled, refused, s.stats.Failures.Load())
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) == 0 || asked[0] != c.as {
				t.Fatalf("the peer asked for the objects of uids %v; want %d", asked, c.as)
			}
		})
	}
}
