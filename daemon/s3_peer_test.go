package daemon

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/asuser"
	"github.com/lastmile/lastmile/objstore/s3test"
	"github.com/lastmile/lastmile/roots"
)

// TestPeerObjectsFollowS3Allow: a peer reads the objects beneath its
// object-store roots with its own credentials, for whatever user a
// ticket names. Whoever holds a requester certificate writes tickets, so
// the peer read every object beneath its roots for any user named. It
// must check the ticket's user against its own s3.allow, by the rule its
// own jobs follow, before any request; with no s3.allow it reads objects
// for nobody but root (whom only peer.trust_root leaves unsquashed), and
// a grant revoked by a reload stops the next read.
func TestPeerObjectsFollowS3Allow(t *testing.T) {
	root := t.TempDir()
	srv, err := s3test.Start(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	proxy, err := s3test.NewProxy(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	os.MkdirAll(filepath.Join(root, "data/ctr"), 0o755)
	writeTinyParquet(t, filepath.Join(root, "data/ctr/a.parquet"))
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.Access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.Secret)
	const obj = "s3://data/ctr/a.parquet"
	peerWith := func(allow []S3Grant) *Daemon {
		t.Helper()
		cfg := DefaultConfig()
		cfg.S3 = S3Config{Endpoint: proxy.URL, PathStyle: true, Allow: allow}
		d, err := New(cfg, nil, nil, "test", nil)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	alice, bob, nobody := asuser.Cred{UID: 1001, GID: 1001}, asuser.Cred{UID: 1002, GID: 1002, Groups: []uint32{2000}}, asuser.Cred{UID: 65534, GID: 65534}
	f := func(d *Daemon, c asuser.Cred, ok bool) {
		t.Helper()
		before := proxy.Requests()
		file, err := d.peerObjects()(c).Open(obj)
		if err == nil {
			file.Close()
		}
		if ok != (err == nil) {
			t.Fatalf("uid %d reads %s on the peer: %v, want allowed=%v", c.UID, obj, err, ok)
		}
		if !ok && !errors.Is(err, fs.ErrPermission) {
			t.Fatalf("uid %d refused with %v, want a permission error", c.UID, err)
		}
		if n := proxy.Requests() - before; !ok && n != 0 {
			t.Fatalf("uid %d refused after %d requests to the store, want none", c.UID, n)
		}
	}
	d := peerWith([]S3Grant{{Prefix: "s3://data/ctr/", Users: []string{"1001"}}, {Prefix: "s3://data/other/", Groups: []string{"2000"}}})
	f(d, alice, true)
	f(d, bob, false)    // his group's grant is elsewhere
	f(d, nobody, false) // uid 0 squashed
	f(d, asuser.Cred{UID: 0}, true)
	revoked := d.Config()
	revoked.S3.Allow = []S3Grant{{Prefix: "s3://data/other/", Users: []string{"1001"}}}
	if _, err := d.Reload(revoked); err != nil {
		t.Fatal(err)
	}
	f(d, alice, false)

	none := peerWith(nil)
	f(none, alice, false)
	f(none, nobody, false)
	f(none, asuser.Cred{UID: 0}, true) // peer.trust_root: the peer's own rights
}

// TestPeerObjectsSayWhyNoClient: a peer whose S3 client could not be
// made (here a user of s3.allow that no longer resolves, as after a
// change to the user database since the config was validated) refuses
// each object with that cause. Before, it was given no object store,
// and its units failed with "this peer reads no object storage
// (configure its s3 section)", for a peer whose s3 section was there.
func TestPeerObjectsSayWhyNoClient(t *testing.T) {
	d, err := New(DefaultConfig(), nil, nil, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	cause := errors.New(`[0].users: "carol": user: unknown user carol`)
	d.s3st.once.Do(func() { d.s3st.err = cause })
	objects := d.peerObjects()
	if objects == nil {
		t.Fatal("the peer was given no object store: its units fail with \"configure its s3 section\", not the cause")
	}
	_, err = objects(asuser.Cred{UID: 1001, GID: 1001}).Open("s3://data/ctr/a.parquet")
	if !errors.Is(err, cause) || !errors.Is(err, roots.ErrObjectRoot) || !strings.Contains(err.Error(), "unknown user carol") {
		t.Fatalf("open on a peer without an S3 client: %v; want the client's error, as an object-store root refused", err)
	}
}
