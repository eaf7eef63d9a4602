package daemon

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/asuser"
	"github.com/lastmile/lastmile/objstore"
)

func TestS3Allow(t *testing.T) {
	cfg := S3Config{Allow: []S3Grant{
		{Prefix: "s3://data/ctr/", Users: []string{"1001"}},
		{Prefix: "s3://data/shared/", Groups: []string{"2000"}},
		{Prefix: "s3://public", Users: []string{"1003"}},
	}}
	grants, err := cfg.grants()
	if err != nil {
		t.Fatal(err)
	}
	f := func(c asuser.Cred, url string, ok bool) {
		t.Helper()
		o, err := objstore.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		err = allowed(grants, c, o)
		if ok != (err == nil) {
			t.Fatalf("uid %d gid %d groups %v reads %s: %v, want allowed=%v", c.UID, c.GID, c.Groups, url, err, ok)
		}
		if err != nil && (!errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), url) || !strings.Contains(err.Error(), "s3.allow")) {
			t.Fatalf("refusal %q: want a permission error naming the object and s3.allow", err)
		}
	}
	alice, bob := asuser.Cred{UID: 1001, GID: 1001}, asuser.Cred{UID: 1002, GID: 1002, Groups: []uint32{2000}}
	f(alice, "s3://data/ctr/day=1/a.parquet", true)
	f(alice, "s3://data/ctr/", true)                  // listing the granted prefix
	f(alice, "s3://data/ctr-secret/a.parquet", false) // a sibling with the same start
	f(alice, "s3://data/", false)                     // listing above the grant
	f(alice, "s3://data/shared/a.parquet", false)
	f(bob, "s3://data/shared/a.parquet", true) // through a supplementary group
	f(bob, "s3://data/ctr/a.parquet", false)
	f(asuser.Cred{UID: 1003}, "s3://public/any/key.parquet", true) // the whole bucket
	f(asuser.Cred{UID: 0}, "s3://other/x.parquet", true)           // root: the daemon's rights
	f(asuser.Cred{UID: 1004}, "s3://data/ctr/a.parquet", false)

	for _, bad := range []S3Grant{
		{Prefix: "s3://data/ctr", Users: []string{"1001"}}, // no trailing '/'
		{Prefix: "/data/ctr/", Users: []string{"1001"}},
		{Prefix: "s3://data/ctr/"},
		{Prefix: "s3://data/ctr/", Users: []string{"no-such-user-lastmile"}},
	} {
		if _, err := (S3Config{Allow: []S3Grant{bad}}).grants(); err == nil {
			t.Errorf("grant %+v accepted", bad)
		}
	}
}
