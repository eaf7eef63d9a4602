package datagen

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
)

// NPYManifest is the name of the JSON file WriteNPY writes last into its
// directory: the Config, the row count and every .npy file with its dtype
// and length. Its presence says the directory is complete.
const NPYManifest = "manifest.json"

// npyChunkRows is the number of rows generated and written at a time per
// column: about 128 KiB for an int64 column, 1.6 MB for a sequence of mean
// length 50.
const npyChunkRows = 16384

// NPYFile describes one .npy file WriteNPY writes: a 1-D array.
type NPYFile struct {
	Name   string `json:"name"`   // file name in the directory, e.g. "seq_0.values.npy"
	Column string `json:"column"` // the table column it belongs to
	Part   string `json:"part"`   // "data", "values", "offsets", "bytes" or "valid"
	Descr  string `json:"descr"`  // NumPy dtype string: "<i8", "<i4", "<f4" or "|u1"
	Len    int64  `json:"len"`    // number of elements (filled in by WriteNPY's manifest)
}

// NPYFiles returns the .npy files WriteNPY writes for cfg, column by column
// in Schema order. Len is left 0: list values and string bytes are only
// counted while writing.
//
//	fixed column NAME           NAME.npy (int32 label, int64 ids and cat_j, float32 dense_j)
//	list column NAME            NAME.values.npy (int64), NAME.offsets.npy (int64, Rows+1)
//	string column NAME          NAME.bytes.npy (uint8, UTF-8), NAME.offsets.npy (int64, Rows+1)
//	nullable column NAME        also NAME.valid.npy (uint8: 1 valid, 0 null)
//
// Row i of a list or string column is values[offsets[i]:offsets[i+1]]
// (offsets[0] is 0). A null row holds the zero value: 0, an empty list or an
// empty string.
func NPYFiles(cfg Config) []NPYFile {
	var out []NPYFile
	for _, c := range Schema(cfg) {
		out = append(out, npyFilesOf(c)...)
	}
	return out
}

func npyFilesOf(c ColumnInfo) []NPYFile {
	f := func(suffix, part, descr string) NPYFile {
		return NPYFile{Name: c.Name + suffix + ".npy", Column: c.Name, Part: part, Descr: descr}
	}
	var out []NPYFile
	switch {
	case c.List:
		out = append(out, f(".values", "values", "<i8"), f(".offsets", "offsets", "<i8"))
	case c.Physical == "BYTE_ARRAY":
		out = append(out, f(".bytes", "bytes", "|u1"), f(".offsets", "offsets", "<i8"))
	case c.Physical == "INT32":
		out = append(out, f("", "data", "<i4"))
	case c.Physical == "INT64":
		out = append(out, f("", "data", "<i8"))
	case c.Physical == "FLOAT":
		out = append(out, f("", "data", "<f4"))
	default:
		panic("BUG: datagen: no npy layout for " + c.Name)
	}
	if c.Nullable {
		out = append(out, f(".valid", "valid", "|u1"))
	}
	return out
}

// WriteNPY writes the rows Write would write for cfg (the same values, row
// i of the table is element i) into dir as NumPy .npy files, one or more
// per column as NPYFiles describes, and then the manifest NPYManifest.
// The files are NPY format version 1.0, little-endian, C order, 1-D, so
// numpy.load(path, mmap_mode="r") maps them. Files, RowGroupRows,
// Compression, DataPageVersion, PageBytes, PageRows and Prefix do not matter.
//
// Each column is generated and written in chunks of npyChunkRows rows by
// one of GOMAXPROCS workers, so memory stays at a few chunk buffers per
// worker whatever Rows is. A file's header is written first with room for
// any length and rewritten with the final length at the end.
//
// Files are written under temporary names and renamed when all are
// complete. On error or cancellation WriteNPY removes every file it created
// and returns the error; cancellation returns ctx's error. Other files in
// dir are left alone (and .npy files of columns this cfg lacks stay, so
// use a fresh directory or read the manifest).
func WriteNPY(ctx context.Context, dir string, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	cols := Schema(cfg)
	plan := planOf(cols)
	gen := NewGenerator(cfg)

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	written := writeNPYColumns(ctx, cancel, dir, gen, cols, plan)

	var all []*npyStream
	for _, s := range written {
		all = append(all, s...)
	}
	fail := func(err error) error {
		for _, s := range all {
			s.remove()
		}
		return err
	}
	if err := context.Cause(ctx); err != nil {
		return fail(err)
	}
	if err := commitNPY(dir, cfg, all); err != nil {
		return fail(err)
	}
	return nil
}

// npyColumnOrder returns the order in which WriteNPY's workers take the
// columns.
func npyColumnOrder(cols []ColumnInfo) []int {
	// One task per column; the costliest (lists, then strings) first so
	// that the tail of the run stays parallel.
	order := make([]int, len(cols))
	for i := range order {
		order[i] = i
	}
	cost := func(c ColumnInfo) int {
		switch {
		case c.List:
			return 2
		case c.Physical == "BYTE_ARRAY":
			return 1
		}
		return 0
	}
	slices.SortStableFunc(order, func(a, b int) int { return cost(cols[b]) - cost(cols[a]) })
	return order
}

// writeNPYColumns writes every column's files with GOMAXPROCS workers and
// returns the streams of each column, by column. The first error cancels
// ctx with that error as its cause; the caller checks it.
func writeNPYColumns(ctx context.Context, cancel context.CancelCauseFunc, dir string, gen *Generator, cols []ColumnInfo, plan []colPlan) [][]*npyStream {
	order := npyColumnOrder(cols)
	var (
		mu      sync.Mutex
		written [][]*npyStream // by column
	)
	written = make([][]*npyStream, len(cols))
	queue := make(chan int)
	workers := max(1, min(runtime.GOMAXPROCS(0), len(cols)))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var w npyColumnWriter
			for c := range queue {
				streams, err := w.column(ctx, dir, gen, cols[c], plan[c])
				mu.Lock()
				written[c] = streams
				mu.Unlock()
				if err != nil {
					cancel(err)
				}
			}
		})
	}
dispatch:
	for _, c := range order {
		select {
		case queue <- c:
		case <-ctx.Done():
			break dispatch
		}
	}
	close(queue)
	wg.Wait()
	return written
}

// commitNPY renames the finished streams to their names and then writes
// the manifest, whose presence says the directory is complete. The caller
// removes the streams on error.
func commitNPY(dir string, cfg Config, all []*npyStream) error {
	manifest := struct {
		Format string    `json:"format"`
		Rows   int64     `json:"rows"`
		Config Config    `json:"config"`
		Files  []NPYFile `json:"files"`
	}{Format: "lastmile datagen npy 1", Rows: cfg.Rows, Config: cfg}
	for _, s := range all {
		manifest.Files = append(manifest.Files, s.info)
	}
	for _, s := range all {
		if err := s.rename(); err != nil {
			return err
		}
	}
	data, err := json.MarshalIndent(manifest, "", "  ")
	if err != nil {
		return fmt.Errorf("BUG: marshal manifest: %w", err)
	}
	return writeAtomic(filepath.Join(dir, NPYManifest), func(f *os.File) error {
		_, err := f.Write(append(data, '\n'))
		return err
	})
}

// npyHeader returns the NPY 1.0 header of a 1-D little-endian array of n
// elements of dtype descr. Its length does not depend on n: the dictionary
// is padded with room for a 19-digit length (as numpy's own writer leaves
// room to grow the first axis), so a stream can write the header first and
// rewrite it in place with the final length. The total length is a
// multiple of 64, as the format asks for alignment.
func npyHeader(descr string, n int64) []byte {
	shape := strconv.FormatInt(n, 10)
	dict := "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + shape + ",), }"
	room := len(dict) - len(shape) + 19
	total := (10 + room + 1 + 63) / 64 * 64
	h := make([]byte, 0, total)
	h = append(h, "\x93NUMPY\x01\x00"...)
	h = binary.LittleEndian.AppendUint16(h, uint16(total-10))
	h = append(h, dict...)
	for len(h) < total-1 {
		h = append(h, ' ')
	}
	return append(h, '\n')
}

// npyStream is one .npy file being written: its header with a placeholder
// length, then elements appended in order.
type npyStream struct {
	info    NPYFile
	path    string
	tmp     string
	f       *os.File
	size    int // bytes per element
	buf     []byte
	renamed bool
}

func createNPY(dir string, info NPYFile) (*npyStream, error) {
	s := &npyStream{info: info, path: filepath.Join(dir, info.Name)}
	switch info.Descr {
	case "<i8":
		s.size = 8
	case "<i4", "<f4":
		s.size = 4
	case "|u1":
		s.size = 1
	default:
		panic("BUG: datagen: npy dtype " + info.Descr)
	}
	f, err := os.CreateTemp(dir, info.Name+".tmp*")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", s.path, err)
	}
	s.f, s.tmp = f, f.Name()
	if _, err := f.Write(npyHeader(info.Descr, 0)); err != nil {
		return s, fmt.Errorf("write %s: %w", s.path, err)
	}
	return s, nil
}

// flush writes the buffered elements.
func (s *npyStream) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	if _, err := s.f.Write(s.buf); err != nil {
		return fmt.Errorf("write %s: %w", s.path, err)
	}
	s.info.Len += int64(len(s.buf) / s.size)
	s.buf = s.buf[:0]
	return nil
}

// finish flushes, rewrites the header with the final length and closes.
func (s *npyStream) finish() error {
	if err := s.flush(); err != nil {
		return err
	}
	if _, err := s.f.WriteAt(npyHeader(s.info.Descr, s.info.Len), 0); err != nil {
		return fmt.Errorf("write header of %s: %w", s.path, err)
	}
	f := s.f
	s.f = nil
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", s.path, err)
	}
	if err := os.Chmod(s.tmp, 0o644); err != nil {
		return fmt.Errorf("chmod %s: %w", s.tmp, err)
	}
	return nil
}

func (s *npyStream) rename() error {
	if err := os.Rename(s.tmp, s.path); err != nil {
		return fmt.Errorf("rename %s: %w", s.tmp, err)
	}
	s.renamed = true
	return nil
}

// remove deletes what the stream made.
func (s *npyStream) remove() {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	if s.renamed {
		os.Remove(s.path)
	} else {
		os.Remove(s.tmp)
	}
}

func (s *npyStream) i64(v int64) {
	s.buf = binary.LittleEndian.AppendUint64(s.buf, uint64(v))
}

func (s *npyStream) i32(v int32) {
	s.buf = binary.LittleEndian.AppendUint32(s.buf, uint32(v))
}

func (s *npyStream) f32(v float32) {
	s.buf = binary.LittleEndian.AppendUint32(s.buf, math.Float32bits(v))
}

func (s *npyStream) u8(v bool) {
	var b byte
	if v {
		b = 1
	}
	s.buf = append(s.buf, b)
}

// npyColumnWriter writes whole columns; each worker owns one and reuses
// its scratch.
type npyColumnWriter struct {
	seq []int64
}

// npyColumn is one column's streams while it is written.
type npyColumn struct {
	data, offsets, valid *npyStream // data, values or bytes; offsets and valid may be nil
	off                  int64      // elements so far, for offsets
}

// column writes every file of column c. It returns the streams it created,
// finished or not, so that the caller can rename or remove them.
func (w *npyColumnWriter) column(ctx context.Context, dir string, g *Generator, c ColumnInfo, p colPlan) ([]*npyStream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	streams, err := createNPYStreams(dir, c)
	if err != nil {
		return streams, err
	}
	col := npyColumnOf(streams)
	if col.offsets != nil {
		col.offsets.i64(0)
	}
	rows := g.cfg.Rows
	for r0 := int64(0); r0 < rows; r0 += npyChunkRows {
		if err := ctx.Err(); err != nil {
			return streams, err
		}
		w.appendRows(g, p, &col, r0, min(r0+npyChunkRows, rows))
		for _, s := range streams {
			if err := s.flush(); err != nil {
				return streams, err
			}
		}
	}
	for _, s := range streams {
		if err := s.finish(); err != nil {
			return streams, err
		}
	}
	return streams, nil
}

// createNPYStreams creates the files of column c. It returns the streams
// it created even on error, so that the caller can remove them.
func createNPYStreams(dir string, c ColumnInfo) ([]*npyStream, error) {
	files := npyFilesOf(c)
	streams := make([]*npyStream, 0, len(files))
	for _, info := range files {
		s, err := createNPY(dir, info)
		if s != nil {
			streams = append(streams, s)
		}
		if err != nil {
			return streams, err
		}
	}
	return streams, nil
}

// npyColumnOf sorts a column's streams by part.
func npyColumnOf(streams []*npyStream) npyColumn {
	col := npyColumn{data: streams[0]}
	for _, s := range streams {
		switch s.info.Part {
		case "offsets":
			col.offsets = s
		case "valid":
			col.valid = s
		}
	}
	return col
}

// appendRows appends rows [r0, r1) of the column p plans to col's
// buffers. The running offset is kept in a local for the loop's sake.
func (w *npyColumnWriter) appendRows(g *Generator, p colPlan, col *npyColumn, r0, r1 int64) {
	data, offsets, valid, off := col.data, col.offsets, col.valid, col.off
	for r := r0; r < r1; r++ {
		switch p.kind {
		case kRowID:
			data.i64(r)
		case kUserID:
			data.i64(g.UserID(r))
		case kItemID:
			data.i64(g.ItemID(r))
		case kLabel:
			data.i32(g.Label(r))
		case kDense:
			data.f32(g.Dense(r, p.j))
		case kCat:
			data.i64(g.Cat(r, p.j))
		case kSeq:
			w.seq = g.AppendSeq(w.seq[:0], r, p.j)
			for _, v := range w.seq {
				data.i64(v)
			}
			off += int64(len(w.seq))
			offsets.i64(off)
		case kQuery:
			q := g.Query(r)
			data.buf = append(data.buf, q...)
			off += int64(len(q))
			offsets.i64(off)
		case kDenseOpt:
			v, ok := g.DenseOpt(r)
			data.f32(v)
			valid.u8(ok)
		case kCatOpt:
			v, ok := g.CatOpt(r)
			data.i64(v)
			valid.u8(ok)
		case kSeqOpt:
			var ok bool
			w.seq, ok = g.AppendSeqOpt(w.seq[:0], r)
			for _, v := range w.seq {
				data.i64(v)
			}
			off += int64(len(w.seq))
			offsets.i64(off)
			valid.u8(ok)
		case kQueryOpt:
			q, ok := g.QueryOpt(r)
			data.buf = append(data.buf, q...)
			off += int64(len(q))
			offsets.i64(off)
			valid.u8(ok)
		default:
			panic("BUG: datagen: unknown column kind")
		}
	}
	col.off = off
}
