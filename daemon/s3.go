package daemon

import (
	"fmt"
	"io/fs"
	"os/user"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/lastmile/lastmile/asuser"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/objstore"
	"github.com/lastmile/lastmile/roots"
)

// S3Config is the daemon's object-storage section. lastmiled reads s3://
// inputs with its OWN credentials (the standard AWS chain of its own
// environment: the unit's Environment= or EnvironmentFile=, its
// ~/.aws, web identity, the instance role), never with a user's: a user's
// environment and ~/.aws are not the daemon's to read, and a secret sent
// with each job would be stored in the job's record for restarts. Since
// those credentials are not the user's, the kernel cannot decide what a
// user may have read; Allow does: an object or listing prefix is read for
// a user only beneath a prefix granted to that user or one of their groups
// (root is read for with the daemon's rights, as for files). With no grant,
// no user reads object storage through the daemon. docs/daemon-security.md.
type S3Config struct {
	// Endpoint, Region and PathStyle: see objstore.Config.
	Endpoint  string `yaml:"endpoint"`
	Region    string `yaml:"region"`
	PathStyle bool   `yaml:"path_style"`
	// RequestTimeout bounds one attempt of a request; 0 is 30s.
	RequestTimeout Duration `yaml:"request_timeout"`
	// Retries per request; 0 is 5.
	Retries int `yaml:"retries"`
	// PrefetchBytes bounds the memory of prefetched column chunks of all
	// jobs together; 0 is 256MiB.
	PrefetchBytes Bytes `yaml:"prefetch_bytes"`
	// Allow grants prefixes to users and groups.
	Allow []S3Grant `yaml:"allow"`
}

// S3Grant lets Users and Groups (names or numeric ids) have lastmiled read
// the objects beneath Prefix ("s3://bucket/dir/", ending in '/').
type S3Grant struct {
	Prefix string   `yaml:"prefix"`
	Users  []string `yaml:"users"`
	Groups []string `yaml:"groups"`
}

// grant is an S3Grant with its names resolved to ids.
type grant struct {
	prefix string
	uids   []uint32
	gids   []uint32
}

func (c *Config) validateS3(bad func(field string, v any, format string, args ...any)) {
	// Each grant on its own, so that every bad one is reported, at its
	// own line, by its prefix.
	for i, g := range c.S3.Allow {
		if _, err := (S3Config{Allow: []S3Grant{g}}).grants(); err != nil {
			what := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "[0]"), ".")
			bad(fmt.Sprintf("s3.allow[%d]", i), g.Prefix, "%s", strings.TrimSpace(what))
		}
	}
	if c.S3.Endpoint != "" {
		if _, err := objstore.New(c.S3.client()); err != nil {
			bad("s3.endpoint", c.S3.Endpoint, "%v", err)
		}
	}
	if c.S3.Retries < 0 || c.S3.Retries > 100 {
		bad("s3.retries", c.S3.Retries, "want 0 (default) to 100")
	}
}

func (s S3Config) client() objstore.Config {
	return objstore.Config{Endpoint: s.Endpoint, Region: s.Region, PathStyle: s.PathStyle,
		RequestTimeout: s.RequestTimeout.D(), Retries: s.Retries, PrefetchBytes: int64(s.PrefetchBytes)}
}

// grants resolves the allow-list.
func (s S3Config) grants() ([]grant, error) {
	var out []grant
	for i, g := range s.Allow {
		o, err := objstore.ParseURL(g.Prefix)
		if err != nil {
			return nil, fmt.Errorf("[%d].prefix: %v", i, err)
		}
		if o.Key != "" && !strings.HasSuffix(o.Key, "/") {
			return nil, fmt.Errorf("[%d].prefix %q: end it with '/' (s3://%s/%s/), or it would also grant %s-other/", i, g.Prefix, o.Bucket, o.Key, g.Prefix)
		}
		r := grant{prefix: objstore.Object{Bucket: o.Bucket, Key: o.Key}.String()}
		for _, u := range g.Users {
			uid, err := lookupUser(u)
			if err != nil {
				return nil, fmt.Errorf("[%d].users: %q: %v", i, u, err)
			}
			r.uids = append(r.uids, uid)
		}
		for _, name := range g.Groups {
			gid, err := lookupGroup(name)
			if err != nil {
				return nil, fmt.Errorf("[%d].groups: %q: %v", i, name, err)
			}
			r.gids = append(r.gids, gid)
		}
		if len(r.uids)+len(r.gids) == 0 {
			return nil, fmt.Errorf("[%d] (%s): grants nobody: list users or groups", i, g.Prefix)
		}
		out = append(out, r)
	}
	return out, nil
}

func lookupUser(s string) (uint32, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(n), nil
	}
	u, err := user.Lookup(s)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(u.Uid, 10, 32)
	return uint32(n), err
}

// s3State is the daemon's S3 client, made at first use, and its grants,
// which a reload replaces (reloadS3): a grant removed from the config
// stops the next check, in running jobs too.
type s3State struct {
	once   sync.Once
	client *objstore.Client
	err    error
	mu     sync.RWMutex
	grants []grant
}

func (d *Daemon) s3() (*objstore.Client, []grant, error) {
	d.s3st.once.Do(func() {
		cfg := d.Config().S3
		grants, err := cfg.grants()
		if err == nil {
			d.s3st.client, err = objstore.New(cfg.client())
		}
		d.s3st.err = err
		d.s3st.mu.Lock()
		d.s3st.grants = grants
		d.s3st.mu.Unlock()
	})
	return d.s3st.client, d.s3Grants(), d.s3st.err
}

// s3Grants returns the grants in force now.
func (d *Daemon) s3Grants() []grant {
	d.s3st.mu.RLock()
	defer d.s3st.mu.RUnlock()
	return d.s3st.grants
}

// reloadS3 applies a reloaded config's s3 section: the grants at once
// (Validate resolved them), the client's settings at the next start; it
// returns those that changed, which need a restart, and keeps the old
// ones in cfg.
func (d *Daemon) reloadS3(old Config, cfg *Config) []string {
	var names []string
	o, c := old.S3, &cfg.S3
	for _, f := range []struct {
		name    string
		changed bool
	}{
		{"s3.endpoint", c.Endpoint != o.Endpoint}, {"s3.region", c.Region != o.Region},
		{"s3.path_style", c.PathStyle != o.PathStyle}, {"s3.request_timeout", c.RequestTimeout != o.RequestTimeout},
		{"s3.retries", c.Retries != o.Retries}, {"s3.prefetch_bytes", c.PrefetchBytes != o.PrefetchBytes},
	} {
		if f.changed {
			names = append(names, f.name)
		}
	}
	c.Endpoint, c.Region, c.PathStyle, c.RequestTimeout, c.Retries, c.PrefetchBytes =
		o.Endpoint, o.Region, o.PathStyle, o.RequestTimeout, o.Retries, o.PrefetchBytes
	if grants, err := c.grants(); err == nil {
		d.s3st.mu.Lock()
		changed := !reflect.DeepEqual(d.s3st.grants, grants)
		d.s3st.grants = grants
		d.s3st.mu.Unlock()
		if changed && d.peerSrv != nil {
			// The peer role's cached jobs hold side tables read under the
			// old grants, and open them no more: their next units
			// compile again, checked by these.
			d.peerSrv.ForgetJobs()
		}
	}
	return names
}

// readerFS is what the daemon reads for a user with: local files opened
// with the user's credentials, s3:// objects with the daemon's own, within
// the prefixes the allow-list grants the user now.
func (d *Daemon) readerFS(c asuser.Cred) decode.FS {
	local := decode.Local(asuser.FS{Cred: c})
	client, _, err := d.s3()
	if err != nil { // Validate ran at start: only a lookup that changed since
		client, _ = objstore.New(objstore.Config{})
		return objstore.Mount(local, client.Source(func(o objstore.Object) error { return allowed(nil, c, o) }))
	}
	return objstore.Mount(local, objectsFor(client, d.s3Grants, c))
}

// objectsFor is client read for the user of c: within the prefixes the
// grants in force at each name (now()) give them, checked before any
// request. A job's readers here and a peer's (peerObjects) are the same.
func objectsFor(client *objstore.Client, now func() []grant, c asuser.Cred) *objstore.Source {
	return client.Source(func(o objstore.Object) error { return allowed(now(), c, o) })
}

// allowed reports whether a grant gives o (an object or a listing prefix)
// to the user of c.
func allowed(grants []grant, c asuser.Cred, o objstore.Object) error {
	if c.UID == 0 {
		return nil
	}
	name := o.String()
	for _, g := range grants {
		if !strings.HasPrefix(name, g.prefix) {
			continue
		}
		if slices.Contains(g.uids, c.UID) || slices.Contains(g.gids, c.GID) ||
			slices.ContainsFunc(c.Groups, func(x uint32) bool { return slices.Contains(g.gids, x) }) {
			return nil
		}
	}
	return &notGranted{msg: fmt.Sprintf("%s: %v: uid %d may not have lastmiled read it: lastmiled reads object storage with its own credentials, only beneath the prefixes its config's s3.allow grants to a user or group (name a prefix granted to you, a narrower glob, or ask the administrator for a grant)",
		name, fs.ErrPermission, c.UID)}
}

// notGranted is allowed's refusal: a permission error whose text says
// what to do, which accessMsg adds nothing to.
type notGranted struct{ msg string }

func (e *notGranted) Error() string { return e.msg }
func (e *notGranted) Unwrap() error { return fs.ErrPermission }

// peerObjects is what a peer reads the objects of its object-store roots
// with, for a ticket's user (after the peer's root squash): the daemon's
// own client, within the prefixes this daemon's s3.allow grants that
// user now, by the rule its own jobs follow (readerFS). A ticket's user
// is the requester's word, taken from any holder of a requester
// certificate; without the check, naming another user read every object
// beneath the roots. With no grant, the peer reads objects for nobody
// (root only with peer.trust_root), as the daemon does for its own jobs.
// Without a client (s3() failed: a user or group of s3.allow that no
// longer resolves, a client the AWS SDK could not make), every object
// is refused with that cause, not as if the peer had no s3 section.
func (d *Daemon) peerObjects() func(asuser.Cred) decode.FS {
	client, _, err := d.s3()
	if err != nil {
		d.log.Error("peer: its S3 client could not be made: it reads no object beneath its object-store roots", "err", err)
		refuse := noObjects{err: fmt.Errorf("%w: this peer's S3 client could not be made (fix its s3 section and restart it): %w", roots.ErrObjectRoot, err)}
		return func(asuser.Cred) decode.FS { return refuse }
	}
	return func(c asuser.Cred) decode.FS { return objectsFor(client, d.s3Grants, c) }
}

// noObjects refuses every name with err.
type noObjects struct{ err error }

func (n noObjects) fail(op, name string) error { return &fs.PathError{Op: op, Path: name, Err: n.err} }

func (n noObjects) Open(name string) (decode.File, error)      { return nil, n.fail("open", name) }
func (n noObjects) Stat(name string) (fs.FileInfo, error)      { return nil, n.fail("stat", name) }
func (n noObjects) ReadDir(name string) ([]fs.DirEntry, error) { return nil, n.fail("readdir", name) }
