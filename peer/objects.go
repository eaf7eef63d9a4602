package peer

import (
	"fmt"
	"io/fs"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/roots"
)

// rootsFS reads the portable names "ROOT/REL" of tickets: beneath a
// directory root through the roots (opened beneath the root by the
// kernel), beneath an object-store root ("ctr: s3://bucket/ctr") through
// objects, by the object's URL. The URL is built by roots.URL, which
// refuses '..' and absolute names, so a ticket cannot name an object
// outside the roots this peer serves.
type rootsFS struct {
	r       *roots.Roots
	objects decode.FS // nil: object-store roots are refused
}

func (f rootsFS) route(name string) (decode.FS, string, error) {
	url, ok, err := f.r.URL(name)
	if err != nil {
		return nil, "", err
	}
	if !ok {
		return decode.Local(f.r), name, nil
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
	return fsys.Open(n)
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
