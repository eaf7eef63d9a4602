package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/lastmile/lastmile/decode"
)

// Source reads a Client's store for one reader: every name is checked by
// Allow before any request is made for it. It is a decode.FS and a
// decode.Lister for "s3://" names; mount it with
// decode.WithSchemes(local, map[string]decode.FS{objstore.Scheme: src}).
type Source struct {
	c *Client
	// allow, when set, refuses objects and prefixes this reader may not
	// have (its error should wrap fs.ErrPermission).
	allow func(Object) error
}

var (
	_ decode.FS     = (*Source)(nil)
	_ decode.Lister = (*Source)(nil)
)

// Source returns a view of c for a reader that may read what allow
// accepts (nil: anything the Client's credentials can).
func (c *Client) Source(allow func(Object) error) *Source { return &Source{c: c, allow: allow} }

// Client returns the Source's client.
func (s *Source) Client() *Client { return s.c }

func (s *Source) parse(name string) (Object, error) {
	o, err := ParseURL(name)
	if err != nil {
		return Object{}, err
	}
	if s.allow != nil {
		if err := s.allow(o); err != nil {
			return Object{}, err
		}
	}
	return o, nil
}

// tailSize is how much of an object's end Open fetches: the footer of
// most Parquet files fits (decode reads the same amount first).
const tailSize = 64 << 10

// Open opens an object. Its first open by this Client fetches the last 64
// KiB (one request); later opens reuse what it learned.
func (s *Source) Open(name string) (decode.File, error) { return s.open(name, false) }

var _ decode.FreshOpener = (*Source)(nil)

// OpenFresh opens an object for planning: it always fetches the last 64
// KiB, which hold the footer the planner reads next, so it costs no
// request more than Open, and it learns the object's version as it is now
// (an object replaced under its key since the last open is planned anew,
// not from the cache) and keeps it for the plan's decoders.
func (s *Source) OpenFresh(name string) (decode.File, error) { return s.open(name, true) }

func (s *Source) open(name string, fresh bool) (decode.File, error) {
	o, err := s.parse(name)
	if err != nil {
		return nil, err
	}
	if o.Key == "" || strings.HasSuffix(o.Key, "/") {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("a prefix, not an object")}
	}
	f := newFile(s.c, o, name)
	if v, ok := s.c.meta.get(name); ok && !fresh {
		f.v = v
		return f, nil
	}
	if err := f.fetchTail(context.Background()); err != nil {
		f.Close()
		return nil, err
	}
	s.c.meta.put(name, f.v)
	return f, nil
}

var _ decode.UnitPrefetcher = (*Source)(nil)

// PrefetchUnit starts fetching the ranges of a unit no decoder has opened
// yet, if its object's version is known (planning opened it); it makes no
// request to learn it.
func (s *Source) PrefetchUnit(name string, ranges []decode.Range) {
	o, err := s.parse(name)
	if err != nil {
		return
	}
	v, ok := s.c.meta.get(name)
	if !ok {
		return
	}
	f := newFile(s.c, o, name)
	f.v = v
	s.c.prefetch(f, ranges)
}

// fetchTail gets the last tailSize bytes of the object, learning its
// size and version from the response.
func (f *File) fetchTail(ctx context.Context) error {
	var tail []byte
	err := f.c.do(ctx, f.obj, func(ctx context.Context) error {
		var opts minio.GetObjectOptions
		opts.SetRange(0, -tailSize)
		body, info, hdr, err := f.c.core.GetObject(ctx, f.obj.Bucket, f.obj.Key, opts)
		if err != nil {
			return err
		}
		defer body.Close()
		start, end, total, ok := contentRange(hdr.Get("Content-Range"))
		if !ok {
			// A 200: the whole object came back. Its first bytes are its
			// last only when it is no longer than the tail asked for.
			total = info.Size
			if total > tailSize {
				return fmt.Errorf("%w (200 and the whole %d-byte object for its last %d bytes)", errNoRange, total, tailSize)
			}
		}
		if total < 0 || total > 1<<50 {
			return fmt.Errorf("object size %d: bad Content-Range %q", total, hdr.Get("Content-Range"))
		}
		n := min(total, tailSize)
		if ok && (start != total-n || end != total-1) {
			// A 206 for another range than the last n bytes.
			return fmt.Errorf("%w: asked the last %d bytes of %d, answered %q", errWrongRange, n, total, hdr.Get("Content-Range"))
		}
		tail = make([]byte, n)
		got, err := io.ReadFull(body, tail)
		f.c.stats.bytes.Add(int64(got))
		if err != nil {
			return fmt.Errorf("read the last %d bytes: %w", n, err)
		}
		f.v = version{size: total, mtime: info.LastModified, etag: info.ETag}
		return nil
	})
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.tail, f.tailOff = tail, f.v.size-int64(len(tail))
	f.mu.Unlock()
	return nil
}

// contentRange parses "bytes start-end/total".
func contentRange(h string) (start, end, total int64, ok bool) {
	rng, tot, ok := strings.Cut(strings.TrimPrefix(h, "bytes "), "/")
	if !ok || !strings.HasPrefix(h, "bytes ") {
		return 0, 0, 0, false
	}
	a, b, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, 0, false
	}
	var err [3]error
	start, err[0] = strconv.ParseInt(a, 10, 64)
	end, err[1] = strconv.ParseInt(b, 10, 64)
	total, err[2] = strconv.ParseInt(tot, 10, 64)
	if err[0] != nil || err[1] != nil || err[2] != nil || start < 0 || end < start {
		return 0, 0, 0, false
	}
	return start, end, total, true
}

// Stat returns an object's info (a HEAD request).
func (s *Source) Stat(name string) (fs.FileInfo, error) {
	return s.StatContext(context.Background(), name)
}

// StatContext is Stat that gives up, with ctx's error, when ctx is done
// (its retries included): for a caller whose HEAD must not wait out the
// store's timeouts.
func (s *Source) StatContext(ctx context.Context, name string) (fs.FileInfo, error) {
	o, err := s.parse(name)
	if err != nil {
		return nil, err
	}
	var info minio.ObjectInfo
	err = s.c.do(ctx, o, func(ctx context.Context) error {
		info, err = s.c.core.StatObject(ctx, o.Bucket, o.Key, minio.StatObjectOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}
	return fileInfo{name: path.Base(o.Key), v: version{size: info.Size, mtime: info.LastModified, etag: info.ETag}}, nil
}

// ReadDir is refused: an object store has prefixes, not directories, and
// the planner lists them with List.
func (s *Source) ReadDir(name string) ([]fs.DirEntry, error) {
	return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("object stores are listed by prefix, not read as directories")}
}

// Owns reports whether name is an s3:// URL.
func (s *Source) Owns(name string) bool { return strings.HasPrefix(name, Scheme+"://") }

// maxList bounds the objects one List returns.
const maxList = decode.MaxFiles + 1

// List returns the objects whose URLs start with prefix, sorted; keys
// ending in '/' (directory markers) are left out.
func (s *Source) List(ctx context.Context, prefix string) ([]string, error) {
	names, _, err := s.list(ctx, prefix, false)
	return names, err
}

// ListStat is List that also returns each object's info as the listing
// gave it, in the order of the names: its size, its Last-Modified (to
// the millisecond, where a HEAD's is to the second) and (Sys) its ETag,
// which a store may leave out of a listing or give otherwise. It makes
// the same requests as List: one per 1,000 objects.
func (s *Source) ListStat(ctx context.Context, prefix string) ([]string, []fs.FileInfo, error) {
	return s.list(ctx, prefix, true)
}

// list is List, and ListStat when stat is set.
func (s *Source) list(ctx context.Context, prefix string, stat bool) ([]string, []fs.FileInfo, error) {
	o, err := s.parse(prefix)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	var infos []fs.FileInfo
	err = s.c.do(ctx, o, func(ctx context.Context) error {
		names, infos = names[:0], infos[:0]
		for info := range s.c.core.ListObjectsIter(ctx, o.Bucket, minio.ListObjectsOptions{Prefix: o.Key, Recursive: true}) {
			if info.Err != nil {
				return info.Err
			}
			if strings.HasSuffix(info.Key, "/") {
				continue
			}
			names = append(names, Object{Bucket: o.Bucket, Key: info.Key}.String())
			if stat {
				infos = append(infos, fileInfo{name: path.Base(info.Key), v: version{size: info.Size, mtime: info.LastModified, etag: info.ETag}})
			}
			if len(names) >= maxList {
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list: %w", err)
	}
	if !stat {
		slices.Sort(names)
		return names, nil, nil
	}
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(names[a], names[b]) })
	sn, si := make([]string, len(order)), make([]fs.FileInfo, len(order))
	for i, j := range order {
		sn[i], si[i] = names[j], infos[j]
	}
	return sn, si, nil
}

// fileInfo is an object's fs.FileInfo; Sys returns its ETag.
type fileInfo struct {
	name string
	v    version
}

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return i.v.size }
func (i fileInfo) Mode() fs.FileMode  { return 0o444 }
func (i fileInfo) ModTime() time.Time { return i.v.mtime }
func (i fileInfo) IsDir() bool        { return false }
func (i fileInfo) Sys() any           { return i.v.etag }
