package datagen

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/parquet-go/parquet-go"
)

// MetadataKey is the key-value metadata key under which every file Write
// produces carries its Config as JSON, so a test can recompute the expected
// values of a file it did not write (see ConfigFromMetadata). Row ids say
// which rows a file holds.
const MetadataKey = "lastmile.datagen.config"

// parquetGoVersion goes into each file's created_by. It is a constant rather
// than read from the build info so that output does not depend on how the
// binary was built; TestParquetGoVersion keeps it in step with go.mod.
const parquetGoVersion = "0.32.0"

// batchRows returns the number of rows generated and handed to the column
// writers at a time: 1024 for 1 MiB pages, fewer for smaller pages so that
// a batch stays well under a page.
func batchRows(pageBytes int) int64 { return int64(min(max(pageBytes/1024, 8), 1024)) }

// ConfigFromMetadata parses the value stored under MetadataKey.
func ConfigFromMetadata(value string) (Config, error) {
	var c Config
	if err := json.Unmarshal([]byte(value), &c); err != nil {
		return Config{}, fmt.Errorf("parse %s metadata: %w", MetadataKey, err)
	}
	return c, c.Validate()
}

// Write generates the table cfg describes into dir (created if needed) as
// cfg.Files files named cfg.FileName(i), and returns their paths in order.
// File i holds rows cfg.FileRows(i) in row groups of cfg.RowGroupRows rows
// (the last one of each file may be shorter).
//
// Row groups are generated in parallel, GOMAXPROCS at a time, whatever the
// number of files, and committed to their file in order. Each row group
// holds its compressed pages in memory until it is committed (with the
// default Config, about 80 MB snappy or 125 MB uncompressed for a
// 131072-row group), and at most GOMAXPROCS+1 are held at once.
//
// Files are written under a temporary name and renamed when complete. On
// error or cancellation Write removes every file it created or replaced and
// returns the error; cancellation returns ctx's error.
func Write(ctx context.Context, dir string, cfg Config) ([]string, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	cols := Schema(cfg)
	options, err := writerOptions(cfg, cols)
	if err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	fail := func(err error) { cancel(err) }

	files, paths, tasks := outFilesOf(dir, cfg, options)
	runTasks(ctx, fail, NewGenerator(cfg), cols, files, tasks)

	if ctx.Err() == nil {
		for _, f := range files {
			if len(f.groups) == 0 { // Rows == 0: an empty file
				if err := f.finish(); err != nil {
					fail(err)
					break
				}
			}
		}
	}
	if err := context.Cause(ctx); err != nil {
		cleanup(files)
		return nil, err
	}
	return paths, nil
}

// writerOptions are the Parquet writer options of every file Write
// writes: cols' schema, cfg's codec and page settings, and cfg itself as
// metadata.
func writerOptions(cfg Config, cols []ColumnInfo) ([]parquet.WriterOption, error) {
	meta, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("BUG: marshal config: %w", err)
	}
	return []parquet.WriterOption{
		parquetSchema(cols),
		parquet.Compression(codec(cfg.Compression)),
		parquet.DataPageVersion(cfg.DataPageVersion),
		parquet.PageBufferSize(cfg.PageBytes),
		parquet.CreatedBy("parquet-go", parquetGoVersion, "lastmile datagen"),
		parquet.KeyValueMetadata(MetadataKey, string(meta)),
	}, nil
}

// outFilesOf lays out Write's output: each file of cfg in dir, its path,
// and one task per row group, in file and row order.
func outFilesOf(dir string, cfg Config, options []parquet.WriterOption) ([]*outFile, []string, []task) {
	files := make([]*outFile, cfg.Files)
	paths := make([]string, cfg.Files)
	var tasks []task
	for i := range files {
		first, end := cfg.FileRows(i)
		paths[i] = filepath.Join(dir, cfg.FileName(i))
		n := int((end - first + cfg.RowGroupRows - 1) / cfg.RowGroupRows)
		files[i] = &outFile{path: paths[i], options: options, groups: make([]*parquet.ConcurrentRowGroupWriter, n)}
		for r := range n {
			lo := first + int64(r)*cfg.RowGroupRows
			tasks = append(tasks, task{file: i, group: r, first: lo, end: min(lo+cfg.RowGroupRows, end)})
		}
	}
	return files, paths, tasks
}

// runTasks builds and commits every row group with GOMAXPROCS workers,
// handing each error to fail, and returns when the workers have stopped.
func runTasks(ctx context.Context, fail func(error), gen *Generator, cols []ColumnInfo, files []*outFile, tasks []task) {
	workers := max(1, min(runtime.GOMAXPROCS(0), len(tasks)))
	// tokens bounds the row groups generated but not yet committed. Tokens
	// are taken in task order, so the row group every other one waits on
	// always holds one and the pipeline cannot deadlock.
	tokens := make(chan struct{}, workers+1)
	queue := make(chan task)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			b := newBuilder(gen, cols)
			for t := range queue {
				if err := b.rowGroup(ctx, files[t.file], t, tokens); err != nil {
					fail(err)
				}
			}
		})
	}
dispatch:
	for _, t := range tasks {
		select {
		case tokens <- struct{}{}:
		case <-ctx.Done():
			break dispatch
		}
		select {
		case queue <- t:
		case <-ctx.Done():
			break dispatch
		}
	}
	close(queue)
	wg.Wait()
}

type task struct {
	file, group int
	first, end  int64 // rows [first, end)
}

// outFile is one output file. It is created when its first row group
// begins, so only the files being worked on are open (at most about
// GOMAXPROCS+1 of them, since tasks go out in file order). Row groups are
// committed in order under mu; the worker that commits the last one
// finishes the file.
type outFile struct {
	path    string
	options []parquet.WriterOption
	tmp     string
	f       *os.File
	w       *parquet.GenericWriter[any]

	mu       sync.Mutex
	groups   []*parquet.ConcurrentRowGroupWriter // built, not yet committed
	next     int                                 // next group to commit
	renamed  bool
	finished bool
}

// openLocked creates the file under a temporary name, once.
func (o *outFile) openLocked() error {
	if o.f != nil {
		return nil
	}
	f, err := os.CreateTemp(filepath.Dir(o.path), filepath.Base(o.path)+".tmp*")
	if err != nil {
		return fmt.Errorf("create %s: %w", o.path, err)
	}
	o.f, o.tmp = f, f.Name()
	o.w = parquet.NewGenericWriter[any](f, o.options...)
	return nil
}

func (o *outFile) begin() (*parquet.ConcurrentRowGroupWriter, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.openLocked(); err != nil {
		return nil, err
	}
	return o.w.BeginRowGroup(), nil
}

// done records group i as built and commits every group that is now next
// in line, giving back a token for each.
func (o *outFile) done(i int, rg *parquet.ConcurrentRowGroupWriter, tokens <-chan struct{}) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.groups[i] = rg
	for o.next < len(o.groups) && o.groups[o.next] != nil {
		if _, err := o.groups[o.next].Commit(); err != nil {
			return fmt.Errorf("write row group %d of %s: %w", o.next, o.path, err)
		}
		o.groups[o.next] = nil
		o.next++
		<-tokens
	}
	if o.next == len(o.groups) {
		return o.finishLocked()
	}
	return nil
}

func (o *outFile) finish() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.finishLocked()
}

func (o *outFile) finishLocked() error {
	if o.finished {
		return nil
	}
	o.finished = true
	if err := o.openLocked(); err != nil { // an empty table's only file
		return err
	}
	if err := o.w.Close(); err != nil {
		return fmt.Errorf("write footer of %s: %w", o.path, err)
	}
	if err := o.f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", o.path, err)
	}
	if err := os.Chmod(o.tmp, 0o644); err != nil {
		return fmt.Errorf("chmod %s: %w", o.tmp, err)
	}
	if err := os.Rename(o.tmp, o.path); err != nil {
		return fmt.Errorf("rename %s: %w", o.tmp, err)
	}
	o.renamed = true
	return nil
}

// cleanup removes what Write made of each file. Workers have stopped.
func cleanup(files []*outFile) {
	for _, o := range files {
		if o == nil || o.f == nil {
			continue
		}
		if o.renamed {
			os.Remove(o.path)
			continue
		}
		o.f.Close()
		os.Remove(o.tmp)
	}
}

// colKind says how a builder generates a column.
type colKind uint8

const (
	kRowID colKind = iota
	kUserID
	kItemID
	kLabel
	kDense
	kCat
	kSeq
	kQuery
	kDenseOpt
	kCatOpt
	kSeqOpt
	kQueryOpt
)

type colPlan struct {
	kind colKind
	j    int // feature index for dense_j, cat_j, seq_j
	name string
}

func planOf(cols []ColumnInfo) []colPlan {
	plan := make([]colPlan, 0, len(cols))
	var dense, cats, seqs int
	for _, c := range cols {
		p := colPlan{name: c.Name}
		switch {
		case c.Name == "row_id":
			p.kind = kRowID
		case c.Name == "user_id":
			p.kind = kUserID
		case c.Name == "item_id":
			p.kind = kItemID
		case c.Name == "label":
			p.kind = kLabel
		case c.Name == "query":
			p.kind = kQuery
		case c.Name == "dense_opt":
			p.kind = kDenseOpt
		case c.Name == "cat_opt":
			p.kind = kCatOpt
		case c.Name == "seq_opt":
			p.kind = kSeqOpt
		case c.Name == "query_opt":
			p.kind = kQueryOpt
		case c.Name == fmt.Sprintf("dense_%d", dense):
			p.kind, p.j = kDense, dense
			dense++
		case c.Name == fmt.Sprintf("cat_%d", cats):
			p.kind, p.j = kCat, cats
			cats++
		case c.Name == fmt.Sprintf("seq_%d", seqs):
			p.kind, p.j = kSeq, seqs
			seqs++
		default:
			panic("BUG: datagen: no generator for column " + c.Name)
		}
		plan = append(plan, p)
	}
	return plan
}

// builder generates row groups; each worker owns one and reuses its
// buffers.
type builder struct {
	g    *Generator
	plan []colPlan
	vals []parquet.Value
}

func newBuilder(g *Generator, cols []ColumnInfo) *builder {
	return &builder{g: g, plan: planOf(cols)}
}

func (b *builder) rowGroup(ctx context.Context, o *outFile, t task, tokens <-chan struct{}) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rg, err := o.begin()
	if err != nil {
		return err
	}
	cws := rg.ColumnWriters()
	if len(cws) != len(b.plan) {
		panic(fmt.Sprintf("BUG: datagen: %d column writers for %d columns", len(cws), len(b.plan)))
	}
	batch, pageRows := batchRows(b.g.cfg.PageBytes), int64(b.g.cfg.PageRows)
	for r0 := t.first; r0 < t.end; {
		if err := ctx.Err(); err != nil {
			return err
		}
		r1 := min(r0+batch, t.end)
		if pageRows > 0 { // end the batch where a page must end
			r1 = min(r1, t.first+((r0-t.first)/pageRows+1)*pageRows)
		}
		for c := range b.plan {
			b.vals = b.column(b.vals[:0], c, r0, r1)
			if _, err := cws[c].WriteRowValues(b.vals); err != nil {
				return fmt.Errorf("write column %s of %s: %w", b.plan[c].name, o.path, err)
			}
		}
		if pageRows > 0 && (r1-t.first)%pageRows == 0 && r1 < t.end {
			for c := range b.plan {
				if err := cws[c].Flush(); err != nil {
					return fmt.Errorf("close a page of column %s of %s: %w", b.plan[c].name, o.path, err)
				}
			}
		}
		r0 = r1
	}
	clear(b.vals[:cap(b.vals)]) // drop references to query strings
	return o.done(t.group, rg, tokens)
}

func strValue(s string) parquet.Value {
	return parquet.ByteArrayValue(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// Values of a required column keep levels 0; those of optional and repeated
// columns get theirs with SetRepetitionLevel and SetDefinitionLevel, which
// inline (Value.Level does not, and cost 13% of the time). Column writers
// ignore the column index.

// defined returns v at definition level 1: a present value of an optional
// column.
func defined(v parquet.Value) parquet.Value {
	v.SetDefinitionLevel(1)
	return v
}

// column appends to v the values of column c for rows [r0, r1), with
// repetition and definition levels set.
func (b *builder) column(v []parquet.Value, c int, r0, r1 int64) []parquet.Value {
	g, p := b.g, b.plan[c]
	null := parquet.NullValue()
	switch p.kind {
	case kRowID:
		for r := r0; r < r1; r++ {
			v = append(v, parquet.Int64Value(r))
		}
	case kUserID:
		for r := r0; r < r1; r++ {
			v = append(v, parquet.Int64Value(g.UserID(r)))
		}
	case kItemID:
		for r := r0; r < r1; r++ {
			v = append(v, parquet.Int64Value(g.ItemID(r)))
		}
	case kLabel:
		for r := r0; r < r1; r++ {
			v = append(v, parquet.Int32Value(g.Label(r)))
		}
	case kDense:
		key := g.kDense[p.j]
		for r := r0; r < r1; r++ {
			v = append(v, parquet.FloatValue(denseValue(rowHash(key, r), p.j)))
		}
	case kCat:
		key, law := g.kCat[p.j], g.cat[p.j]
		for r := r0; r < r1; r++ {
			v = append(v, parquet.Int64Value(law.id(rowHash(key, r))))
		}
	case kSeq:
		key, card := g.kSeq[p.j], SeqCardinality(p.j)
		for r := r0; r < r1; r++ {
			h := rowHash(key, r)
			n := seqLen(h, g.seqScale, g.cfg.SeqMaxLen)
			v = appendList(v, h, n, card, 1)
		}
	case kQuery:
		for r := r0; r < r1; r++ {
			v = append(v, strValue(g.Query(r)))
		}
	case kDenseOpt:
		for r := r0; r < r1; r++ {
			if x, ok := g.DenseOpt(r); ok {
				v = append(v, defined(parquet.FloatValue(x)))
			} else {
				v = append(v, null)
			}
		}
	case kCatOpt:
		for r := r0; r < r1; r++ {
			if x, ok := g.CatOpt(r); ok {
				v = append(v, defined(parquet.Int64Value(x)))
			} else {
				v = append(v, null)
			}
		}
	case kSeqOpt:
		for r := r0; r < r1; r++ {
			h, n := g.seqOptLen(r)
			if n < 0 {
				v = append(v, null)
				continue
			}
			v = appendList(v, h, n, Items, 2)
		}
	case kQueryOpt:
		for r := r0; r < r1; r++ {
			if s, ok := g.QueryOpt(r); ok {
				v = append(v, defined(strValue(s)))
			} else {
				v = append(v, null)
			}
		}
	default:
		panic("BUG: datagen: unknown column kind")
	}
	return v
}

// appendList appends one row of a list column: n elements of cardinality
// card drawn from h, at definition level def (the column's maximum), or for
// n == 0 the single null value at level def-1 that marks an empty list.
func appendList(v []parquet.Value, h uint64, n int, card int64, def int) []parquet.Value {
	if n == 0 {
		x := parquet.NullValue()
		x.SetDefinitionLevel(def - 1)
		return append(v, x)
	}
	base := len(v)
	v = slices.Grow(v, n)[:base+n]
	out := v[base:]
	for k := range out {
		out[k] = parquet.Int64Value(cubeID(elemHash(h, k), card))
		out[k].SetRepetitionLevel(1)
		out[k].SetDefinitionLevel(def)
	}
	out[0].SetRepetitionLevel(0)
	return v
}
