package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"

	"github.com/minio/minio-go/v7"

	"github.com/lastmile/lastmile/decode"
)

// File is an open object: a decode.File and decode.Prefetcher. Its
// methods are called from one goroutine (see the package doc for the
// prefetch protocol); Stat may be called from any.
type File struct {
	c    *Client
	obj  Object
	name string
	v    version

	tail    []byte // the object's last bytes, from Open (may be nil)
	tailOff int64

	ctx    context.Context // cancelled by Close: stops fetches
	cancel context.CancelFunc
	blocks []*block // the current unit's prefetched blocks, by offset
	sem    chan struct{}
}

var (
	_ decode.File       = (*File)(nil)
	_ decode.Prefetcher = (*File)(nil)
)

// block is one prefetched range. buf and err are written by its fetch
// goroutine and read only after done is closed.
type block struct {
	off    int64
	buf    []byte
	err    error
	done   chan struct{}
	cancel context.CancelFunc
}

func newFile(c *Client, o Object, name string) *File {
	ctx, cancel := context.WithCancel(context.Background())
	return &File{c: c, obj: o, name: name, ctx: ctx, cancel: cancel, sem: make(chan struct{}, c.cfg.Concurrency)}
}

// Stat returns the object's size, modification time and (Sys) ETag, as
// Open saw them.
func (f *File) Stat() (fs.FileInfo, error) { return fileInfo{name: path.Base(f.obj.Key), v: f.v}, nil }

// Close stops the file's fetches and releases its blocks.
func (f *File) Close() error {
	f.cancel()
	f.drop()
	return nil
}

// ReadAt reads len(p) bytes at off: from the tail Open fetched, from a
// prefetched block, or with a ranged GET straight into p.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset %d", f.name, off)
	}
	if off >= f.v.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), f.v.size-off))
	var err error
	switch {
	case f.tail != nil && off >= f.tailOff:
		copy(p[:n], f.tail[off-f.tailOff:])
	case f.fromBlock(p[:n], off):
	default:
		err = f.get(f.ctx, p[:n], off)
	}
	if err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// fromBlock copies p from a prefetched block covering [off, off+len(p)),
// waiting for it; false if none covers it or its fetch failed.
func (f *File) fromBlock(p []byte, off int64) bool {
	for _, b := range f.blocks {
		if off < b.off || off+int64(len(p)) > b.off+int64(len(b.buf)) {
			continue
		}
		<-b.done
		if b.err != nil {
			return false // read on demand: that read retries and reports
		}
		copy(p, b.buf[off-b.off:])
		return true
	}
	return false
}

// get reads exactly len(p) bytes at off with one ranged GET (and its
// retries), carrying If-Match so that a replaced object fails.
func (f *File) get(ctx context.Context, p []byte, off int64) error {
	if off+int64(len(p)) > f.v.size {
		return fmt.Errorf("%s: %w: %d bytes at %d past its %d", f.name, ErrTruncated, len(p), off, f.v.size)
	}
	return f.c.do(ctx, f.obj, func(ctx context.Context) error {
		var opts minio.GetObjectOptions
		if err := opts.SetRange(off, off+int64(len(p))-1); err != nil {
			return err
		}
		if f.v.etag != "" {
			opts.SetMatchETag(f.v.etag)
		}
		body, _, hdr, err := f.c.core.GetObject(ctx, f.obj.Bucket, f.obj.Key, opts)
		if err != nil {
			return err
		}
		defer body.Close()
		if cr := hdr.Get("Content-Range"); cr == "" && off != 0 {
			return errors.New("the store ignored the Range header")
		}
		got, err := io.ReadFull(body, p)
		f.c.stats.bytes.Add(int64(got))
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return fmt.Errorf("body cut short: %d of %d bytes at offset %d: %w", got, len(p), off, io.ErrUnexpectedEOF)
		}
		return err
	})
}

// Prefetch starts fetching ranges (a unit's column chunks) in the
// background, merged where less than CoalesceGap apart, within the
// Client's budget. The previous unit's blocks are dropped first.
func (f *File) Prefetch(ranges []decode.Range) {
	f.drop()
	if f.c.cfg.PrefetchBytes < 0 {
		return
	}
	for _, r := range coalesce(ranges, f.c.cfg.CoalesceGap, f.c.cfg.MaxBlock, f.tailOff, f.tail != nil) {
		if r.Off < 0 || r.Len <= 0 || r.Off+r.Len > f.v.size || !f.c.tryAcquire(r.Len) {
			continue
		}
		ctx, cancel := context.WithCancel(f.ctx)
		b := &block{off: r.Off, buf: make([]byte, r.Len), done: make(chan struct{}), cancel: cancel}
		f.blocks = append(f.blocks, b)
		go func() {
			defer close(b.done)
			select {
			case f.sem <- struct{}{}:
			case <-ctx.Done():
				b.err = ctx.Err()
				return
			}
			b.err = f.get(ctx, b.buf, b.off)
			<-f.sem
		}()
	}
}

// drop cancels and waits for the blocks' fetches, then releases them.
func (f *File) drop() {
	for _, b := range f.blocks {
		b.cancel()
	}
	for _, b := range f.blocks {
		<-b.done
		f.c.release(int64(len(b.buf)))
	}
	f.blocks = f.blocks[:0]
}

// coalesce sorts ranges, leaves out what the tail holds, merges ranges
// less than gap apart and splits the results into pieces of at most
// maxBlock bytes.
func coalesce(ranges []decode.Range, gap, maxBlock, tailOff int64, haveTail bool) []decode.Range {
	rs := make([]decode.Range, 0, len(ranges))
	for _, r := range ranges {
		if haveTail && r.Off+r.Len > tailOff {
			r.Len = tailOff - r.Off
		}
		if r.Len > 0 {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b decode.Range) int { return int(min(max(a.Off-b.Off, -1), 1)) })
	var merged []decode.Range
	for _, r := range rs {
		if k := len(merged) - 1; k >= 0 && r.Off <= merged[k].Off+merged[k].Len+gap {
			merged[k].Len = max(merged[k].Len, r.Off+r.Len-merged[k].Off)
			continue
		}
		merged = append(merged, r)
	}
	var out []decode.Range
	for _, r := range merged {
		for r.Len > maxBlock {
			out = append(out, decode.Range{Off: r.Off, Len: maxBlock})
			r.Off, r.Len = r.Off+maxBlock, r.Len-maxBlock
		}
		out = append(out, r)
	}
	return out
}
