package decode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// Where a unit's bytes come from.
//
// The planner and the Decoder read through three small interfaces, in the
// manner of litestream's ReplicaClient: FS (open, stat, list), File (an
// open file or object: ranged reads and its size and version) and two
// optional ones a remote source adds, Lister (flat listing by prefix, for
// globs over object keys) and Prefetcher (the ranges a unit is about to
// read, so a remote file fetches them in few requests and ahead of the
// reads). Local files are *os.File behind File: ReadAt is pread(2) into the
// decoder's own window, so the local path has no copy beyond the kernel's
// and no extra allocation per read. Object stores (package objstore) are
// mounted by URL scheme with WithSchemes; their names stay full URLs
// ("s3://bucket/key") in plans and units.
//
// Rejected: an io/fs.FS-shaped source (fs.File has no ReadAt, and its
// names forbid the absolute paths and URLs inputs use); handing decoders
// byte slices of whole chunks (a 40 MB sequence chunk would be copied once
// more on the local path, where pread into the window is free); mapping
// local files instead of pread (measured no faster: the mapping's
// population costs what the copy did, and the decompressor then reads
// the page cache cold; docs/decode.md, "Choice").

// File is an open file or object. ReadAt may be called from one goroutine
// at a time per Decoder (a Decoder is single-goroutine), but a File shared
// between planners must be safe for concurrent ReadAt, as *os.File is.
// Stat gives the size and the modification time that units record, so a
// changed file is refused (ErrFileChanged).
type File interface {
	io.ReaderAt
	io.Closer
	Stat() (fs.FileInfo, error)
}

var _ File = (*os.File)(nil)

// LocalFS is a source of local files opened as *os.File, the shape of
// asuser.FS (reads as a user) and roots.Roots (reads beneath data roots).
// Local adapts one to FS.
type LocalFS interface {
	Open(name string) (*os.File, error)
	Stat(name string) (fs.FileInfo, error)
	ReadDir(name string) ([]fs.DirEntry, error)
}

// Local returns l as an FS. Its files are l's *os.File, unwrapped.
func Local(l LocalFS) FS { return localFS{l} }

type localFS struct{ l LocalFS }

func (f localFS) Open(name string) (File, error) {
	file, err := f.l.Open(name)
	if err != nil {
		return nil, err
	}
	return file, nil
}
func (f localFS) Stat(name string) (fs.FileInfo, error)      { return f.l.Stat(name) }
func (f localFS) ReadDir(name string) ([]fs.DirEntry, error) { return f.l.ReadDir(name) }

// Lister is implemented by sources with flat namespaces (object stores),
// where a "directory" is a key prefix and walking it directory by
// directory would cost a request per level. For inputs it Owns, the
// planner lists by prefix instead of calling Stat and ReadDir:
//   - a glob ("s3://b/t/day=*/*.parquet") lists the prefix before its first
//     meta character and keeps the names path.Match accepts, so '*' does not
//     cross a '/';
//   - a name ending in '/' lists every *.parquet object under it;
//   - a name ending in ".parquet" is that object, with no listing (so a
//     single file's plan costs only its footer's request);
//   - any other name is the object itself if it exists, else a prefix as
//     above.
type Lister interface {
	// Owns reports whether name is one of this source's (has its scheme).
	Owns(name string) bool
	// List returns the full names of the objects whose names start with
	// prefix, sorted. It fails for a prefix the credentials may not list.
	List(ctx context.Context, prefix string) ([]string, error)
}

// FreshOpener is implemented by sources that reuse what an earlier open
// learned of a file (an object store's size and ETag, which cost a request
// to learn). Decoders of a plan open through Open, where reuse is safe: a
// unit records the version it was planned from, and a changed file is
// refused. Planning opens through OpenFresh, which asks the source what the
// file is now: a plan made from a remembered version of an object that has
// since been replaced would only be refused by its first read.
type FreshOpener interface {
	OpenFresh(name string) (File, error)
}

// openFresh opens name for planning: with OpenFresh where fsys has it.
func openFresh(fsys FS, name string) (File, error) {
	if f, ok := fsys.(FreshOpener); ok {
		return f.OpenFresh(name)
	}
	return fsys.Open(name)
}

// Range is a byte range of a file: Len bytes at Off.
type Range struct{ Off, Len int64 }

// Prefetcher is implemented by the Files of remote sources. The Decoder
// calls Prefetch from Open with a unit's ranges (the dictionary and page
// ranges of its projected column chunks, in field order); the file may
// start fetching them in the background, coalescing nearby ranges and
// within its source's memory bound, so that the ReadAt calls that follow
// are served from memory. Prefetch must not block on the network; a
// failed or dropped prefetch is only lost time: ReadAt then reads on
// demand and reports the error. Local files do not implement it: the
// kernel's readahead does this already.
type Prefetcher interface {
	Prefetch(ranges []Range)
}

// UnitPrefetcher is implemented by remote sources that can fetch a unit's
// bytes before any decoder opens it: the engine announces the unit a
// worker will take next (PrefetchUnit), so that its bytes arrive while
// the current unit decodes. Like Prefetch, it must not block on the
// network, and stays within the source's memory bound.
type UnitPrefetcher interface {
	PrefetchUnit(name string, ranges []Range)
}

// PrefetchUnit asks fsys to start fetching u's ranges if it is a
// UnitPrefetcher; for local files it does nothing. Of the fields marked
// in deferred (indexed as the plan's fields; nil: none) it asks only for
// the dictionaries and OffsetIndexes: their pages are for a decoder with
// DeferPrefetch to fetch once it knows the rows.
func PrefetchUnit(fsys FS, u *Unit, deferred []bool) {
	p, ok := fsys.(UnitPrefetcher)
	if !ok {
		return
	}
	p.PrefetchUnit(u.File, unitRanges(u, deferred, nil, nil))
}

// ContextReaderAt is implemented by Files whose reads wait on a network:
// the Decoder reads through ReadAtContext with the context given to Open,
// so that cancelling a job stops a read in flight (and its retries)
// instead of waiting out the store's timeouts.
type ContextReaderAt interface {
	ReadAtContext(ctx context.Context, p []byte, off int64) (int, error)
}

// ctxReader binds a ContextReaderAt to a context.
type ctxReader struct {
	ctx context.Context
	f   ContextReaderAt
}

func (r ctxReader) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAtContext(r.ctx, p, off) }

// withContext returns f reading under ctx when it can.
func withContext(ctx context.Context, f File) io.ReaderAt {
	if c, ok := f.(ContextReaderAt); ok && ctx != nil {
		return ctxReader{ctx, c}
	}
	return f
}

// WithSchemes returns an FS that sends names beginning with "SCHEME://"
// to remote[SCHEME] and every other name to local (nil: OSFS). The result
// is a Lister for the names its remote sources own.
func WithSchemes(local FS, remote map[string]FS) FS {
	if len(remote) == 0 {
		return orOS(local)
	}
	return schemeFS{local: orOS(local), remote: remote}
}

type schemeFS struct {
	local  FS
	remote map[string]FS
}

// ErrNoScheme is returned for a URL whose scheme no source serves.
var ErrNoScheme = errors.New("no source for this URL scheme")

func (s schemeFS) pick(name string) (FS, error) {
	scheme, _, ok := strings.Cut(name, "://")
	if !ok || strings.ContainsRune(scheme, '/') {
		return s.local, nil
	}
	if r, ok := s.remote[scheme]; ok {
		return r, nil
	}
	return nil, fmt.Errorf("%q: %w %q (configured: %s)", name, ErrNoScheme, scheme, strings.Join(s.schemes(), ", "))
}

func (s schemeFS) schemes() []string {
	var out []string
	for k := range s.remote {
		out = append(out, k+"://")
	}
	return out
}

func (s schemeFS) Open(name string) (File, error) {
	f, err := s.pick(name)
	if err != nil {
		return nil, err
	}
	return f.Open(name)
}

// OpenFresh passes a planning open to the source of name.
func (s schemeFS) OpenFresh(name string) (File, error) {
	f, err := s.pick(name)
	if err != nil {
		return nil, err
	}
	return openFresh(f, name)
}

func (s schemeFS) Stat(name string) (fs.FileInfo, error) {
	f, err := s.pick(name)
	if err != nil {
		return nil, err
	}
	return f.Stat(name)
}

func (s schemeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	f, err := s.pick(name)
	if err != nil {
		return nil, err
	}
	return f.ReadDir(name)
}

// PrefetchUnit passes the announcement to the source of name.
func (s schemeFS) PrefetchUnit(name string, ranges []Range) {
	if f, err := s.pick(name); err == nil {
		if p, ok := f.(UnitPrefetcher); ok {
			p.PrefetchUnit(name, ranges)
		}
	}
}

// Owns is true for the URLs of the remote sources that are Listers, and
// for URLs of unknown schemes (so that List reports ErrNoScheme).
func (s schemeFS) Owns(name string) bool {
	f, err := s.pick(name)
	if err != nil {
		return true
	}
	l, ok := f.(Lister)
	return ok && l.Owns(name)
}

func (s schemeFS) List(ctx context.Context, prefix string) ([]string, error) {
	f, err := s.pick(prefix)
	if err != nil {
		return nil, err
	}
	l, ok := f.(Lister)
	if !ok {
		return nil, fmt.Errorf("%q: source cannot list", prefix)
	}
	return l.List(ctx, prefix)
}

// expandObjects expands one object-store input (see Lister).
func expandObjects(ctx context.Context, l Lister, in string) ([]string, error) {
	if hasMeta(in) {
		if _, err := path.Match(in, ""); err != nil {
			return nil, fmt.Errorf("plan: glob %q: %w", in, err)
		}
		names, err := l.List(ctx, in[:strings.IndexAny(in, "*?[")])
		if err != nil {
			return nil, fmt.Errorf("plan: list %q: %w", in, err)
		}
		var out []string
		for _, n := range names {
			if ok, _ := path.Match(in, n); ok || matchesDir(in, n) {
				out = append(out, n)
			}
		}
		return capFiles(out, in)
	}
	if strings.HasSuffix(in, ".parquet") {
		return []string{in}, nil
	}
	names, err := l.List(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("plan: list %q: %w", in, err)
	}
	dir := in
	if !strings.HasSuffix(dir, "/") {
		for _, n := range names {
			if n == in {
				return []string{in}, nil
			}
		}
		dir += "/"
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, dir) && strings.HasSuffix(n, ".parquet") {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("plan: no object %s and no *.parquet objects under %s: %w", in, dir, fs.ErrNotExist)
	}
	return capFiles(out, in)
}

// matchesDir reports whether glob matches a "directory" of object name
// n (a prefix of n ending before a '/') and n is a *.parquet object: a
// glob that matches directories reads what is under them, as a
// directory input does ("s3://b/events/dt=2026-11-2*").
func matchesDir(glob, n string) bool {
	if !strings.HasSuffix(n, ".parquet") {
		return false
	}
	for i := strings.IndexByte(n, '/'); i >= 0; {
		if ok, _ := path.Match(glob, n[:i]); ok {
			return true
		}
		j := strings.IndexByte(n[i+1:], '/')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

func capFiles(names []string, in string) ([]string, error) {
	if len(names) > MaxFiles {
		return nil, fmt.Errorf("plan: more than %d objects match %s: name fewer prefixes", MaxFiles, in)
	}
	return names, nil
}

// unitRanges returns the byte ranges a unit's chunks read, in field
// order: for the fields marked in deferred (nil: none) only what their
// decode reads whatever the rows, the dictionary page and the
// OffsetIndex (deferprefetch.go).
func unitRanges(u *Unit, deferred, indexed []bool, dst []Range) []Range {
	dst = dst[:0]
	for i := range u.Chunks {
		c := &u.Chunks[i]
		if c.Absent {
			continue
		}
		if c.DictLen > 0 {
			dst = append(dst, Range{Off: c.DictOffset, Len: c.DictLen})
		}
		if i < len(indexed) && indexed[i] && c.ColIndexLen > 0 && c.IndexLen > 0 {
			dst = append(dst, Range{Off: c.Index, Len: int64(c.IndexLen)}, Range{Off: c.ColIndex, Len: int64(c.ColIndexLen)})
		}
		switch {
		case i >= len(deferred) || !deferred[i]:
			dst = append(dst, Range{Off: c.Offset, Len: c.End - c.Offset})
		case c.IndexLen > 0:
			dst = append(dst, Range{Off: c.Index, Len: int64(c.IndexLen)})
		}
	}
	return dst
}
