package decode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"syscall"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/format"
)

// Decoder decodes units into column batches. Make one per worker and reuse
// it: it keeps its buffers, decompressors and a few open files across
// units. A Decoder is not safe for concurrent use. The zero value is not
// usable; call NewDecoder.
type Decoder struct {
	base   []Field // the fields it was made for
	fields []Field // as the open unit's chunks store them (promotedView)
	files  fileCache
	z      decompressor

	// Set by Open.
	ctx    context.Context
	unit   Unit
	file   File
	open   bool
	ranges []Range // the unit's ranges, for a Prefetcher
	// deferred marks the fields whose bytes Open does not prefetch
	// (DeferPrefetch); nil: none.
	deferred []bool
	// indexed marks the fields whose page indexes Open prefetches
	// (PrefetchPageIndex); nil: none.
	indexed []bool

	pr       pageReader // reads the column chunk's pages
	page     []byte     // decompressed v1 pages and values that need a pass
	dictBuf  []byte     // decompressed dictionary page
	dictConv []byte     // a dictionary converted from its stored type (decimal.go)
	conv     []byte     // a page's stored values before conversion
	rep      []uint8    // repetition levels of one page
	def      []uint8    // definition levels of one page
	starts   []int32    // positions of the row-starting levels of one page
	pfx      []byte     // the decoded level part of a snappy v1 page
	save     []byte     // column bytes a v1 page's levels overwrite for a moment
	idx      []int32    // dictionary indexes of one page
	rows     []int32    // selected rows of one page
	lens     []int64    // DELTA_* decoded integers
	prefix   []int64    // DELTA_BYTE_ARRAY prefix lengths
	dict     dictionary
	hdr      pageHeader
	scratch  column.Column // pages only partly in the unit or selection
	// scratchOwn holds scratch's own Data while scratch views d.page
	// (scratchView).
	scratchOwn  []byte
	scratchView bool
	stash       [][]byte // per field: a Valid buffer set aside while a unit had no nulls
	// want is the rows the column being decoded will hold when it is the
	// unit's own and every row of the unit goes in (0: not known), and
	// wantMax the most bytes its values can take (the chunk's level
	// count times the value size); see growData.
	want, wantMax int
	// wantStored bounds growData's estimate by the chunk's stored bytes
	// (storedBound): want and wantMax are the footer's word.
	wantStored int64
	// verify makes Open check units against their files' footers
	// (VerifyUnits).
	verify bool
	// whole is whether the open unit is its row group whole, so that a
	// chunk's level count is its own (reserveWhole).
	whole bool

	// alloc, if not nil, gives the buffer reserveWhole reserves (SetAlloc).
	alloc func(n int) []byte

	idxRaw []byte // an OffsetIndex as read
	// hdrRaw holds a skipped page's header as read (skipByIndex);
	// idxAt is the indexed page the walk reads next, its rows
	// idxAt.end-idxAt.off aside: checked against its header (-1: none).
	hdrRaw  []byte
	skipHdr pageHeader
	idxAt   pageLoc
	idxRows int64
	idxSet  bool
	locs    []pageLoc // its pages within the unit's chunk
	// locsBy holds each field's pages of the open unit once read
	// (fieldPageIndex), where locsSet says so; Open clears locsSet.
	locsBy  [][]pageLoc
	locsSet []bool
	stats   Stats
}

// NewDecoder returns a decoder for the given fields, normally a plan's
// Fields; units decoded with it must come from a plan with those fields.
func NewDecoder(fields []Field) *Decoder { return NewDecoderFS(fields, nil) }

// NewDecoderFS returns a decoder for fields that opens files through fsys
// (nil: OSFS).
func NewDecoderFS(fields []Field, fsys FS) *Decoder {
	return &Decoder{base: fields, fields: slices.Clone(fields), files: fileCache{max: 4, fs: orOS(fsys)}, stash: make([][]byte, len(fields))}
}

// Fields returns the fields the decoder was made for.
func (d *Decoder) Fields() []Field { return d.base }

// Close closes the decoder's files and releases its decompressors. The
// decoder must not be used afterwards.
func (d *Decoder) Close() error {
	d.z.close()
	d.open = false
	return d.files.closeAll()
}

// Open prepares a unit for DecodeColumn: it validates the unit, opens the
// file (or finds it open) and checks that its size and modification time
// are those planned. ctx is checked by every later DecodeColumn call of
// this unit, between pages.
func (d *Decoder) Open(ctx context.Context, u Unit) error {
	d.open = false
	if err := ctx.Err(); err != nil {
		return err
	}
	fail := func(err error) error { return &Error{File: u.File, RowGroup: u.RowGroup, PageOffset: -1, Err: err} }
	if len(u.Chunks) != len(d.fields) {
		return fail(fmt.Errorf("unit has %d chunks, decoder has %d fields", len(u.Chunks), len(d.fields)))
	}
	if err := u.validate(); err != nil {
		return fail(fmt.Errorf("%w: %v", ErrBadUnit, err))
	}
	f, err := d.files.planned(&u)
	if err != nil {
		return fail(err)
	}
	if d.verify {
		if err := d.checkUnit(f, &u, u.FileSize); err != nil {
			return fail(err)
		}
	}
	for i := range d.fields {
		if err := viewable(&d.base[i], &u.Chunks[i], u.Rows); err != nil {
			return fail(err)
		}
		d.fields[i] = promotedView(&d.base[i], &u.Chunks[i])
	}
	d.ctx, d.unit, d.file, d.open = ctx, u, f, true
	clear(d.locsSet)
	d.whole = u.Whole(d.fields)
	if p, ok := f.(Prefetcher); ok {
		d.ranges = unitRanges(&u, d.deferred, d.indexed, d.ranges)
		p.Prefetch(d.ranges)
	}
	return nil
}

// Whole reports whether u is every row of its row group, as the decoder
// needs to size a column's buffer once for it (reserveWhole). With only
// list fields it cannot tell, and says no.
func (u *Unit) Whole(fields []Field) bool {
	return u.RowStart == 0 && u.GroupRows(fields) == u.Rows
}

// statFile returns f's size and modification time (unix nanoseconds). A
// local file is fstat'ed without allocating; other files give their Stat.
func statFile(f File) (size, mtime int64, err error) {
	if osf, ok := f.(*os.File); ok {
		var st syscall.Stat_t
		if err := syscall.Fstat(int(osf.Fd()), &st); err != nil {
			return 0, 0, err
		}
		return st.Size, st.Mtim.Nano(), nil
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	return fi.Size(), fi.ModTime().UnixNano(), nil
}

// Decode decodes every field of u into dst, reusing dst's buffers:
// dst.Columns gets one column per field, in field order, each of u.Rows
// rows. On error dst's contents are unspecified.
func (d *Decoder) Decode(ctx context.Context, u Unit, dst *column.Batch) error {
	if err := d.Open(ctx, u); err != nil {
		return err
	}
	if cap(dst.Columns) < len(d.fields) {
		dst.Columns = append(dst.Columns[:cap(dst.Columns)], make([]column.Column, len(d.fields)-cap(dst.Columns))...)
	}
	dst.Columns = dst.Columns[:len(d.fields)]
	dst.Rows = 0
	for i := range d.fields {
		if err := d.DecodeColumn(i, nil, &dst.Columns[i]); err != nil {
			return err
		}
	}
	dst.Rows = int(u.Rows)
	return nil
}

// SetAlloc makes the decoder take the values buffer of each column it
// sizes for a whole row group from alloc (nil: from the heap, as by
// default): lastmile's unit arena (engine/arena.go), so that a unit's
// columns are decoded where the trainer will read them. alloc returns a
// buffer of at least n bytes, or nil for none (the heap then). Only a
// column whose buffer is short is given one: clear dst's Data first.
func (d *Decoder) SetAlloc(alloc func(n int) []byte) { d.alloc = alloc }

// DecodeColumn decodes field of the unit given to Open into dst, reusing
// dst's buffers. A nil sel decodes all the unit's rows; otherwise sel
// holds strictly increasing row indexes within the unit and dst gets
// exactly those rows, in order. Pages holding no selected row are skipped
// without being decompressed where their row count is known from the page
// header (v2 pages, and v1 pages of non-repeated columns).
func (d *Decoder) DecodeColumn(field int, sel []int32, dst *column.Column) (err error) {
	if !d.open {
		return errors.New("decode: DecodeColumn before a successful Open")
	}
	if field < 0 || field >= len(d.fields) {
		return fmt.Errorf("decode: field %d out of range [0, %d)", field, len(d.fields))
	}
	defer func() {
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); fault {
				// A memory fault writing into dst's memory (a unit arena
				// shrunk under us) is not the file's fault: it goes on to
				// the worker's recovery (shm/fault.go).
				panic(r)
			}
			err = d.errorf(field, -1, fmt.Errorf("%w: decoder panic: %v", ErrCorrupt, r))
		}
	}()
	if sel != nil {
		for i, s := range sel {
			if s < 0 || int64(s) >= d.unit.Rows || (i > 0 && s <= sel[i-1]) {
				return fmt.Errorf("decode: selection must be strictly increasing rows in [0, %d); entry %d is %d", d.unit.Rows, i, s)
			}
		}
	}
	return d.decodeColumn(field, sel, dst)
}

func (d *Decoder) errorf(field int, pageOffset int64, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	name := ""
	if field >= 0 {
		name = d.fields[field].Name
	}
	return &Error{File: d.unit.File, RowGroup: d.unit.RowGroup, Column: name, PageOffset: pageOffset, Err: err}
}

func readFull(f io.ReaderAt, b []byte, off int64) error {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == io.EOF || err == nil {
		return corruptf("file ends inside a column chunk (read %d of %d bytes at offset %d)", n, len(b), off)
	}
	return fmt.Errorf("read: %w", err)
}

// growBytes returns b with length n, reallocating (contents lost) when
// its capacity is short.
func growBytes(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]byte, n, n+n/8)
}

// extend returns b grown by n bytes, keeping its contents.
func extend(b []byte, n int) []byte {
	l := len(b) + n
	if cap(b) >= l {
		return b[:l]
	}
	nb := make([]byte, l, max(l+l/4, 64))
	copy(nb, b)
	return nb
}

// growData extends col.Data by n bytes for a page that brings col to
// rows rows. Grown a page at a time, a unit's column was reallocated and
// copied about a dozen times the first time a batch held it (extend's
// 1.25x steps): in an all-column job, 6% of the CPU of its first epoch
// (pprof; docs/benchmarks.md, "Copies"). When the unit's own column must
// grow, it is sized once for all the unit's rows at the bytes per row
// seen so far, and an eighth more, but never past what the whole column
// chunk's values can take: a first page of long lists must not size the
// column for a unit of them. Nor past maxExpansion times the chunk's
// stored bytes (storedBound), as reserveWhole: a footer claiming 2^31
// rows must not size a column for them before its pages show them.
func (d *Decoder) growData(col *column.Column, n, rows int) []byte {
	l := len(col.Data) + n
	if cap(col.Data) >= l || col == &d.scratch || rows <= 0 || d.want <= rows || d.wantMax <= 0 {
		return extend(col.Data, n)
	}
	est := int64(l) * int64(d.want) / int64(rows)
	est += est / 8
	est = min(est, int64(len(col.Data))+int64(d.wantMax))
	// The declared rows and values are the writer's word: past what the
	// chunk's stored bytes can expand to, grow as extend does.
	est = min(est, max(d.wantStored, int64(l)+int64(l)/4))
	nb := make([]byte, l, max(int(est), l))
	copy(nb, col.Data)
	return nb
}

func growU8(b []uint8, n int) []uint8 {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]uint8, n, n+n/8)
}

// fileCache keeps a few files open, least recently used out first.
type fileCache struct {
	fs      FS
	max     int
	entries []fileEntry
	clock   uint64
}

type fileEntry struct {
	path string
	f    File
	used uint64
	meta *format.FileMetaData // its footer, once a verifying decoder read it
}

// footer returns the footer of path, open as f with size bytes, reading it
// once per time the file is open.
func (c *fileCache) footer(path string, f File, size int64) (*format.FileMetaData, error) {
	for i := range c.entries {
		e := &c.entries[i]
		if e.path != path {
			continue
		}
		if e.meta == nil {
			md, err := readFooter(f, size)
			if err != nil {
				return nil, err
			}
			e.meta = md
		}
		return e.meta, nil
	}
	return readFooter(f, size)
}

func (c *fileCache) get(path string) (File, error) {
	c.clock++
	for i := range c.entries {
		if c.entries[i].path == path {
			c.entries[i].used = c.clock
			return c.entries[i].f, nil
		}
	}
	f, err := c.fs.Open(path)
	if err != nil {
		return nil, err
	}
	c.put(path, f)
	return f, nil
}

// put keeps f as path's open file, closing the least recently used one
// past c.max.
func (c *fileCache) put(path string, f File) {
	c.clock++
	if len(c.entries) >= c.max {
		old := 0
		for i := range c.entries {
			if c.entries[i].used < c.entries[old].used {
				old = i
			}
		}
		c.entries[old].f.Close()
		c.entries[old] = fileEntry{path: path, f: f, used: c.clock}
		return
	}
	c.entries = append(c.entries, fileEntry{path: path, f: f, used: c.clock})
}

// planned returns u's file if it is still the version u was planned
// from. A source may have answered from what an earlier open remembered
// (FreshOpener): a mismatch is then asked of the source once more, fresh,
// so that a version remembered from before the plan does not refuse it.
func (c *fileCache) planned(u *Unit) (File, error) {
	f, err := c.get(u.File)
	if err != nil {
		return nil, err
	}
	size, mtime, err := statFile(f)
	if err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}
	if size == u.FileSize && mtime == u.ModTime {
		return f, nil
	}
	c.drop(u.File)
	if _, ok := c.fs.(FreshOpener); ok {
		if f, err = openFresh(c.fs, u.File); err != nil {
			return nil, err
		}
		if size, mtime, err = statFile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("stat: %w", err)
		}
		if size == u.FileSize && mtime == u.ModTime {
			c.put(u.File, f)
			return f, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("%w: size %d mtime %d, planned %d and %d", ErrFileChanged, size, mtime, u.FileSize, u.ModTime)
}

func (c *fileCache) drop(path string) {
	for i := range c.entries {
		if c.entries[i].path == path {
			c.entries[i].f.Close()
			c.entries = append(c.entries[:i], c.entries[i+1:]...)
			return
		}
	}
}

func (c *fileCache) closeAll() error {
	var first error
	for _, e := range c.entries {
		if err := e.f.Close(); err != nil && first == nil {
			first = err
		}
	}
	c.entries = nil
	return first
}
