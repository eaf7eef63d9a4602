package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/lastmile/lastmile/decode"
)

// File is an open object: a decode.File and decode.Prefetcher. Its
// methods may be called from several goroutines, Close included: a read
// that Close overtakes returns the object's bytes (it holds the tail it
// began with, which Close drops but never changes), and one that begins
// after Close fails with an error wrapping os.ErrClosed.
type File struct {
	c       *Client
	obj     Object
	name    string
	v       version
	tailOff int64 // where tail starts in the object: set by Open, then fixed

	mu     sync.Mutex
	tail   []byte // the object's last bytes, from Open (may be nil); under mu
	closed bool   // under mu
}

var (
	_ decode.File            = (*File)(nil)
	_ decode.Prefetcher      = (*File)(nil)
	_ decode.ContextReaderAt = (*File)(nil)
)

func newFile(c *Client, o Object, name string) *File { return &File{c: c, obj: o, name: name} }

// Stat returns the object's size, modification time and (Sys) ETag, as
// Open saw them.
func (f *File) Stat() (fs.FileInfo, error) { return fileInfo{name: path.Base(f.obj.Key), v: f.v}, nil }

// Close releases nothing but the tail: prefetched blocks belong to the
// Client, and go when read or stale. Reads that begin after it fail.
func (f *File) Close() error {
	f.mu.Lock()
	f.tail, f.closed = nil, true
	f.mu.Unlock()
	return nil
}

// openTail returns the tail (nil: none), or, once the file is closed,
// the error of a read of it.
func (f *File) openTail() ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, &fs.PathError{Op: "read", Path: f.obj.String(), Err: os.ErrClosed}
	}
	return f.tail, nil
}

// ReadAt reads len(p) bytes at off: from the tail Open fetched, from
// prefetched blocks, or with a ranged GET straight into p.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	return f.ReadAtContext(context.Background(), p, off)
}

// ReadAtContext is ReadAt that gives up, with ctx's error, when ctx is
// done (decode.ContextReaderAt). What the tail holds is copied from it,
// even for a read that starts before the tail: those bytes are never
// fetched again. Blocks holding them count them as read (Client.credit).
func (f *File) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset %d", f.name, off)
	}
	tail, err := f.openTail()
	if err != nil {
		return 0, err
	}
	if off >= f.v.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), f.v.size-off))
	head := n // the bytes before the tail
	if end := off + int64(n); tail != nil && end > f.tailOff {
		from := max(off, f.tailOff)
		head = int(from - off)
		copy(p[head:n], tail[from-f.tailOff:])
		f.c.credit(f, from, end)
	}
	if err := f.readHead(ctx, p[:head], off); err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// readHead fills p (bytes at off before the tail) from prefetched blocks,
// and what no block holds with ranged GETs.
func (f *File) readHead(ctx context.Context, p []byte, off int64) error {
	n := len(p)
	for i := 0; i < n; {
		k, err := f.c.take(ctx, f, p[i:n], off+int64(i))
		if err != nil {
			return err
		}
		if i += k; i == n {
			break
		}
		// No block holds off+i: read on demand up to the next block
		// (which then serves its bytes, and is released), or the end.
		j := int(f.c.nextBlock(f, off+int64(i), off+int64(n)) - off)
		if err := f.get(ctx, p[i:j], off+int64(i)); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// Prefetch starts fetching ranges (a unit's column chunks) in the
// background: see Client.prefetch.
func (f *File) Prefetch(ranges []decode.Range) { f.c.prefetch(f, ranges) }

// get reads exactly len(p) bytes at off with one ranged GET (and its
// retries), carrying If-Match (If-Unmodified-Since when the store gave no
// ETag) so that a replaced object fails.
func (f *File) get(ctx context.Context, p []byte, off int64) error {
	if off+int64(len(p)) > f.v.size {
		return fmt.Errorf("%s: %w: %d bytes at %d past its %d", f.name, ErrTruncated, len(p), off, f.v.size)
	}
	err := f.c.do(ctx, f.obj, func(ctx context.Context) error {
		var opts minio.GetObjectOptions
		if err := opts.SetRange(off, off+int64(len(p))-1); err != nil {
			return err
		}
		if f.v.etag != "" {
			opts.SetMatchETag(f.v.etag)
		} else if !f.v.mtime.IsZero() {
			// No ETag: the Last-Modified Open saw is the version. It came
			// in whole seconds; the object's own mtime may have a
			// fraction, and a store may compare it whole (versitygw
			// does): unmodified since the end of that second. (A change
			// within that second goes unseen; versitygw ignores a date
			// in the future, so an object written in the last second is
			// not checked.)
			opts.SetUnmodified(f.v.mtime.Truncate(time.Second).Add(time.Second))
		}
		body, info, hdr, err := f.c.core.GetObject(ctx, f.obj.Bucket, f.obj.Key, opts)
		if err != nil {
			return err
		}
		defer body.Close()
		if f.v.etag != "" && info.ETag != "" && info.ETag != f.v.etag {
			// A store (or a cache) that did not evaluate If-Match.
			return fmt.Errorf("%w: ETag %q answered for If-Match %q: the object was replaced in the store", decode.ErrFileChanged, info.ETag, f.v.etag)
		}
		if cr := hdr.Get("Content-Range"); cr == "" {
			if off != 0 {
				return errNoRange
			}
		} else if start, end, _, ok := contentRange(cr); !ok || start != off || end < off+int64(len(p))-1 {
			// A 206 for another range: its body is not the bytes at off.
			return fmt.Errorf("%w: asked bytes %d-%d, answered %q", errWrongRange, off, off+int64(len(p))-1, cr)
		}
		got, err := io.ReadFull(body, p)
		f.c.stats.bytes.Add(int64(got))
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return fmt.Errorf("body cut short: %d of %d bytes at offset %d: %w", got, len(p), off, io.ErrUnexpectedEOF)
		}
		return err
	})
	if errors.Is(err, decode.ErrFileChanged) || errors.Is(err, ErrTruncated) {
		f.c.meta.drop(f.name, f.v) // the next Open asks the store again
	}
	return err
}
