package peer

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/lastmile/lastmile/asuser"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/roots"
)

// rootsFS reads the portable names "ROOT/REL" of tickets: beneath a
// directory root through the roots (opened beneath the root by the
// kernel), beneath an object-store root ("ctr: s3://bucket/ctr") through
// objects, by the object's URL. The URL is built by roots.URL, which
// refuses '..' and absolute names, so a ticket cannot name an object
// outside the roots this peer serves.
//
// Files beneath a directory root are opened as user (userRoots): the
// kernel checks the user's permission on the file and on every directory
// beneath the root, as the GPU host's kernel did at submission. Objects
// are read with the peer's object-store credentials, through objects,
// which ServerConfig.Objects made for user and which refuses what user
// may not have read: a ticket's user is the requester's word, so the GPU
// host's check alone would let any holder of a requester certificate
// read every object beneath the roots by naming another user.
type rootsFS struct {
	r       *roots.Roots
	objects decode.FS // nil: object-store roots are refused
	user    User
	// side, when set, records the files and objects opened (a job's
	// compile: its side tables, sidefiles.go).
	side *sideFiles
	// listed, when set, is given each object a List lists, with its
	// info as the listing gave it, where objects can say (a check of
	// side tables: sidefiles.go).
	listed func(name string, fi fs.FileInfo)
}

func (f rootsFS) route(name string) (decode.FS, string, error) {
	url, ok, err := f.r.URL(name)
	if err != nil {
		return nil, "", err
	}
	if !ok {
		return decode.Local(userRoots{f.r, f.user.cred(), f.side}), name, nil
	}
	if f.objects == nil {
		return nil, "", &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: this peer reads no object storage (configure its s3 section)", roots.ErrObjectRoot)}
	}
	return f.objects, url, nil
}

func (f rootsFS) Open(name string) (decode.File, error) {
	fsys, n, err := f.route(name)
	if err != nil {
		return nil, err
	}
	file, err := fsys.Open(n)
	if err == nil && n != name { // an object, by its URL
		f.side.noteObject(name, file)
	}
	return file, err
}

// OpenFresh opens name asking its source what it is now
// (decode.FreshOpener), for a decoder whose source remembered a version
// older than the unit's plan: the GPU host planned it after this peer's
// object client last read it.
func (f rootsFS) OpenFresh(name string) (decode.File, error) {
	fsys, n, err := f.route(name)
	if err != nil {
		return nil, err
	}
	var file decode.File
	if fo, ok := fsys.(decode.FreshOpener); ok {
		file, err = fo.OpenFresh(n)
	} else {
		file, err = fsys.Open(n)
	}
	if err == nil && n != name { // an object, by its URL
		f.side.noteObject(name, file)
	}
	return file, err
}

func (f rootsFS) Stat(name string) (fs.FileInfo, error) {
	fsys, n, err := f.route(name)
	if err != nil {
		return nil, err
	}
	return fsys.Stat(n)
}

func (f rootsFS) ReadDir(name string) ([]fs.DirEntry, error) {
	fsys, n, err := f.route(name)
	if err != nil {
		return nil, err
	}
	return fsys.ReadDir(n)
}

// statContext is Stat within ctx: an object's HEAD through objects'
// StatContext where it has one (objstore.Source); else Stat, waited for
// until ctx is done (the call itself then ends on its own).
func (f rootsFS) statContext(ctx context.Context, name string) (fs.FileInfo, error) {
	fsys, n, err := f.route(name)
	if err != nil {
		return nil, err
	}
	if sc, ok := fsys.(interface {
		StatContext(context.Context, string) (fs.FileInfo, error)
	}); ok {
		return sc.StatContext(ctx, n)
	}
	type result struct {
		fi  fs.FileInfo
		err error
	}
	done := make(chan result, 1)
	go func() {
		fi, err := fsys.Stat(n)
		done <- result{fi, err}
	}()
	select {
	case r := <-done:
		return r.fi, r.err
	case <-ctx.Done():
		return nil, &fs.PathError{Op: "stat", Path: name, Err: ctx.Err()}
	}
}

var _ decode.Lister = rootsFS{}

// Owns reports whether name is beneath an object-store root: the planner
// expands a directory or glob there by listing its prefix (List), as it
// does an s3:// URL, not by Stat and ReadDir, which an object store has
// no directories for.
func (f rootsFS) Owns(name string) bool {
	_, ok, err := f.r.URL(name)
	return ok && err == nil
}

// List lists the objects beneath the portable prefix ("ROOT/REL",
// ending in '/' or not) through objects, as the user may (objects
// refuses a prefix they were not granted), and returns their portable
// names.
func (f rootsFS) List(ctx context.Context, prefix string) ([]string, error) {
	fsys, url, err := f.route(prefix)
	if err != nil {
		return nil, err
	}
	l, ok := fsys.(decode.Lister)
	if !ok {
		return nil, &fs.PathError{Op: "list", Path: prefix, Err: fmt.Errorf("%w: this peer's object store cannot list", roots.ErrObjectRoot)}
	}
	if strings.HasSuffix(prefix, "/") && !strings.HasSuffix(url, "/") {
		url += "/" // URL cleans the name: "ctr/side/" lists side/, not sidecar/
	}
	root, _, _ := roots.Split(prefix)
	base, _, _ := f.r.URL(root)
	var urls []string
	var infos []fs.FileInfo
	if ls, ok := fsys.(interface {
		ListStat(context.Context, string) ([]string, []fs.FileInfo, error)
	}); ok && f.listed != nil {
		urls, infos, err = ls.ListStat(ctx, url)
	} else {
		urls, err = l.List(ctx, url)
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(urls))
	for i, u := range urls {
		if rel, ok := strings.CutPrefix(u, base); ok {
			names = append(names, root+"/"+rel)
			if infos != nil {
				f.listed(root+"/"+rel, infos[i])
			}
		}
	}
	return names, nil
}

// userRoots opens names beneath the roots with a user's credentials,
// recording what it opens in side (nil: nothing).
type userRoots struct {
	r    *roots.Roots
	c    asuser.Cred
	side *sideFiles
}

func (u userRoots) Open(name string) (f *os.File, err error) {
	err = u.c.Do(func() (err error) { f, err = u.r.Open(name); return err })
	if err == nil {
		u.side.note(name, f)
	}
	return f, err
}

func (u userRoots) Stat(name string) (fi fs.FileInfo, err error) {
	err = u.c.Do(func() (err error) { fi, err = u.r.Stat(name); return err })
	return fi, err
}

func (u userRoots) ReadDir(name string) (ents []fs.DirEntry, err error) {
	err = u.c.Do(func() (err error) { ents, err = u.r.ReadDir(name); return err })
	return ents, err
}
