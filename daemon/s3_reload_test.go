package daemon

import (
	"errors"
	"io/fs"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/asuser"
	"github.com/lastmile/lastmile/objstore"
)

// TestReloadRevokesS3Grant: an administrator who removes a user's
// s3.allow grant and reloads (SIGHUP, systemctl reload) is told
// "configuration reloaded", with nothing about s3 among the keys that need
// a restart (docs/daemon.md: the keys that do not reload "are logged as
// needing a restart"). But the daemon made its grants once, at its first
// S3 read, and kept them: the user went on having lastmiled read the
// revoked prefix until a restart. (And before any S3 read since the start,
// a reload did apply: what a reload does depended on history.) Grants
// must reload; the client's settings, which cannot, must be named.
func TestReloadRevokesS3Grant(t *testing.T) {
	cfg := DefaultConfig()
	cfg.S3 = S3Config{Endpoint: "http://127.0.0.1:9", PathStyle: true,
		Allow: []S3Grant{{Prefix: "s3://data/ctr/", Users: []string{"1001"}}}}
	d, err := New(cfg, nil, nil, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	alice := asuser.Cred{UID: 1001, GID: 1001}
	o, _ := objstore.ParseURL("s3://data/ctr/a.parquet")
	check := func() error {
		_, grants, err := d.s3()
		if err != nil {
			t.Fatal(err)
		}
		return allowed(grants, alice, o)
	}
	if err := check(); err != nil {
		t.Fatalf("granted: %v", err)
	}
	// The grant given to a user who was already served, and a job's
	// reader made before the reload.
	fsys := d.readerFS(alice)
	revoked := d.Config()
	revoked.S3.Allow = []S3Grant{{Prefix: "s3://data/other/", Users: []string{"1001"}}}
	ignored, err := d.Reload(revoked)
	if err != nil {
		t.Fatal(err)
	}
	if err := check(); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("after a reload that revoked the grant (reload named %v as needing a restart): %v; want a permission error", ignored, err)
	}
	if _, err := fsys.Stat("s3://data/ctr/a.parquet"); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("a reader made before the reload, after it revoked the grant: %v; want a permission error", err)
	}
	moved := d.Config()
	moved.S3.Endpoint = "http://127.0.0.1:10"
	if ignored, err = d.Reload(moved); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ignored, "s3.endpoint") {
		t.Errorf("a reload that changed s3.endpoint named %v as needing a restart; want s3.endpoint among them", ignored)
	}
}
