package decode

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/parquet-go/parquet-go/format"
)

// PlanOptions configure PlanFiles. The zero value projects every column
// and makes one unit per row group.
type PlanOptions struct {
	// Columns are the top-level column names to project, in output order.
	// Empty projects every top-level column in schema order.
	Columns []string
	// MaxUnitRows caps the rows of a unit; larger row groups are sliced.
	// 0 means no cap: one unit per row group.
	MaxUnitRows int64
	// IgnoreOffsetIndex slices row groups at even row counts, decoding and
	// trimming, even where an OffsetIndex would give page boundaries. For
	// tests and comparisons.
	IgnoreOffsetIndex bool
	// FS is where the files come from; nil is OSFS. Decoders made by
	// Plan.NewDecoder open files through the same FS.
	FS FS
	// Partitions declares the partition columns whose values the files'
	// paths give (partition.go). Columns may name them.
	Partitions []PartitionKey
	// Hashed names string and list<string> columns to read as int64 ids:
	// each string s as XXH64(s) mod the name's modulus (hashed.go).
	Hashed map[string]uint64
	// Table, if not nil, gives the file at path the schema of its table
	// (Iceberg; nil for a file of no table): its columns are then found
	// by field id, whatever their names in the file (fieldid.go).
	Table func(path string) *TableSchema
	// Listed says that the inputs are files a listing found (ExpandInputs,
	// an Iceberg snapshot's data files): PlanFiles plans each by its name,
	// as it is (a name holding '*', '?' or '[' is no pattern), without
	// listing, stating or walking it again. Duplicates are dropped. A
	// name that is no longer there fails when it is opened. Inputs given
	// by a user are not Listed: a directory or a prefix is expanded.
	Listed bool

	tableFields *tableFields // set by PlanFiles for its files (promote.go)
}

// FileInfo describes one planned file.
type FileInfo struct {
	Path      string `json:"path"`
	Size      int64  `json:"size"`
	ModTime   int64  `json:"mod_time"` // unix nanoseconds
	Rows      int64  `json:"rows"`
	RowGroups int    `json:"row_groups"`
}

// Plan is the result of PlanFiles: the files, the projected fields and the
// units, in a deterministic order. It is read-only once made.
type Plan struct {
	Files  []FileInfo `json:"files"`
	Fields []Field    `json:"fields"`
	// Partitions are the projected partition columns, after Fields in
	// the output; a unit's Partition holds their values.
	Partitions []Field `json:"partitions,omitempty"`
	Units      []Unit  `json:"units"`
	// Unreadable are the columns that projecting every column left out
	// (the first file's): the decoder cannot read them.
	Unreadable []Unreadable `json:"unreadable,omitempty"`
	Rows       int64        `json:"rows"` // sum of the units' rows

	fs FS // where the files come from; not serialized: a unit is decoded wherever its reader has its own
}

// FS returns where the plan's files come from.
func (p *Plan) FS() FS { return orOS(p.fs) }

// NewDecoder returns a decoder for the plan's fields that opens files
// through the plan's FS.
func (p *Plan) NewDecoder() *Decoder { return NewDecoderFS(p.Fields, p.fs) }

// PlanFiles expands inputs (files, globs, or directories searched
// recursively for *.parquet; each input's matches sorted, duplicates
// dropped; as they are with opts.Listed: PlanInputs), reads each file's
// footer once, resolves opts.Columns and cuts the files into units.
// Every planned file must agree on the projected columns; the error
// names the first file and column that does not.
func PlanFiles(ctx context.Context, inputs []string, opts PlanOptions) (*Plan, error) {
	fsys := orOS(opts.FS)
	paths, err := PlanInputs(ctx, inputs, opts)
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("plan: no parquet files in %q", inputs)
	}
	files, parts, err := splitPartitions(opts.Columns, opts.Partitions)
	if err != nil {
		return nil, err
	}
	p := &Plan{fs: opts.FS}
	for _, k := range parts {
		p.Partitions = append(p.Partitions, k.Field())
	}
	fileOpts := opts
	fileOpts.Columns = files
	fileOpts.tableFields = &tableFields{}
	plans, errs := planEach(ctx, fsys, paths, fileOpts, parts)
	for i, fp := range plans {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if err := p.add(fp); err != nil {
			return nil, err
		}
	}
	for i := range p.Units {
		p.Units[i].Seq = i
	}
	return p, nil
}

func hasMeta(s string) bool { return strings.ContainsAny(s, "*?[") }

// filePlan is what planning one file gives, apart from the others: the
// file, its fields as its own schema resolves them, and its units (their
// Ordinal and Seq are the plan's to set).
type filePlan struct {
	info       FileInfo
	fields     []Field
	unreadable []Unreadable
	units      []Unit
}

// add appends fp to the plan, after the files before it: its fields must
// agree with the first file's.
func (p *Plan) add(fp *filePlan) error {
	if len(p.Files) == 0 {
		p.Fields, p.Unreadable = fp.fields, fp.unreadable
	} else {
		if len(fp.fields) != len(p.Fields) {
			return &Error{File: fp.info.Path, RowGroup: -1, PageOffset: -1,
				Err: fmt.Errorf("%w with %s: %d columns vs %d (name the columns to read)", ErrSchemaMismatch, p.Files[0].Path, len(fp.fields), len(p.Fields))}
		}
		for i := range fp.fields {
			if d := p.Fields[i].sameAs(&fp.fields[i]); d != "" {
				return &Error{File: fp.info.Path, RowGroup: -1, Column: fp.fields[i].Name, PageOffset: -1,
					Err: fmt.Errorf("%w with %s: %s", ErrSchemaMismatch, p.Files[0].Path, d)}
			}
			if p.Fields[i].Absent && !fp.fields[i].Absent {
				// The first file that has the column gives the plan
				// its field; later ones agree with it in full.
				p.Fields[i] = fp.fields[i]
			}
			if p.Fields[i].TimeUnit == 0 {
				p.Fields[i].TimeUnit = fp.fields[i].TimeUnit // a plain INT64 in the files before
			}
		}
	}
	if p.Rows > math.MaxInt64-fp.info.Rows {
		return &Error{File: fp.info.Path, RowGroup: -1, PageOffset: -1,
			Err: corruptf("the files planned hold more than 2^63 rows in all")}
	}
	for _, u := range fp.units {
		u.Ordinal = p.Rows
		p.Rows += u.Rows
		p.Units = append(p.Units, u)
	}
	p.Files = append(p.Files, fp.info)
	return nil
}

// planFile reads path's footer (and, to slice row groups, its offset
// indexes) and cuts it into units.
func planFile(ctx context.Context, fsys FS, path string, opts PlanOptions, parts []PartitionKey) (*filePlan, error) {
	f, err := openFresh(fsys, path)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	fail := func(err error) error { return &Error{File: path, RowGroup: -1, PageOffset: -1, Err: err} }
	md, err := readFooter(f, st.Size())
	if err != nil {
		return nil, fail(err)
	}
	root, err := buildSchema(md.Schema)
	if err != nil {
		return nil, fail(corrupt(err))
	}
	var table *TableSchema
	if opts.Table != nil {
		table = opts.Table(path)
	}
	fields, unreadable, err := resolveFields(root, opts.Columns, opts.Hashed, table, opts.tableFields)
	if err != nil {
		return nil, fail(err)
	}
	if err := checkPartitionNames(root, opts.Partitions); err != nil {
		return nil, fail(err)
	}
	values, err := PartitionValues(path, parts)
	if err != nil {
		return nil, fail(err)
	}
	fp := &filePlan{info: FileInfo{Path: path, Size: st.Size(), ModTime: st.ModTime().UnixNano(), RowGroups: len(md.RowGroups)}, fields: fields, unreadable: unreadable}
	for rg := range md.RowGroups {
		g := &md.RowGroups[rg]
		if g.NumRows < 0 {
			return nil, &Error{File: path, RowGroup: rg, PageOffset: -1, Err: corruptf("row group has %d rows", g.NumRows)}
		}
		if g.NumRows == 0 {
			continue
		}
		chunks := make([]Chunk, len(fields))
		for i := range fields {
			c, err := chunkOf(g, &fields[i], fp.info.Size)
			if err != nil {
				return nil, &Error{File: path, RowGroup: rg, Column: fields[i].Name, PageOffset: -1, Err: err}
			}
			chunks[i] = c
		}
		if name, err := checkGroupRows(g, fields, chunks); err != nil {
			return nil, &Error{File: path, RowGroup: rg, Column: name, PageOffset: -1, Err: err}
		}
		base := Unit{File: path, FileSize: fp.info.Size, ModTime: fp.info.ModTime, RowGroup: rg, Rows: g.NumRows, GroupRowCount: g.NumRows, Chunks: chunks,
			Bounds: groupBounds(g, fields), Partition: values}
		units, err := sliceRowGroup(ctx, f, fp.info.Size, g, fields, base, opts, maxFileUnits(fp.info.Size)-len(fp.units))
		if err != nil {
			if e, ok := err.(*Error); ok && e.File == "" { // a column's: checkOffsetIndex
				e.File, e.RowGroup = path, rg
				return nil, e
			}
			return nil, &Error{File: path, RowGroup: rg, PageOffset: -1, Err: err}
		}
		if fp.info.Rows > math.MaxInt64-g.NumRows {
			return nil, &Error{File: path, RowGroup: rg, PageOffset: -1, Err: corruptf("row groups of more than 2^63 rows in all")}
		}
		fp.units = append(fp.units, units...)
		fp.info.Rows += g.NumRows
	}
	return fp, nil
}

// checkGroupRows refuses a row group whose num_rows is more than one of
// its column chunks' num_values: every row has at least one level in
// every leaf column, so the chunk cannot hold those rows. num_rows is the
// writer's word, and the planner would otherwise cut units (and the
// decoder size columns) for rows the file does not hold. It checks the
// projected chunks, or every chunk of the row group when no projected
// column is in the file. It returns the column at fault, if any.
func checkGroupRows(g *format.RowGroup, fields []Field, chunks []Chunk) (string, error) {
	checked := false
	for i := range chunks {
		if chunks[i].Absent {
			continue
		}
		checked = true
		if chunks[i].Values < g.NumRows {
			return fields[i].Name, corruptf("row group claims %d rows, but its column chunk holds %d values (at least one a row)", g.NumRows, chunks[i].Values)
		}
	}
	if checked {
		return "", nil
	}
	if len(g.Columns) == 0 {
		return "", corruptf("row group claims %d rows and has no column chunks", g.NumRows)
	}
	for i := range g.Columns {
		if v := g.Columns[i].MetaData.NumValues; v < g.NumRows {
			return strings.Join(g.Columns[i].MetaData.PathInSchema, "."), corruptf("row group claims %d rows, but its column chunk holds %d values (at least one a row)", g.NumRows, v)
		}
	}
	return "", nil
}

// maxFileUnits bounds the units planning cuts one file into: one per
// byte of the file, and a thousand more. A unit is a few hundred bytes of
// plan (more with its chunks), so a file's plan stays within a few
// hundred times the file's size whatever row counts its footer claims; a
// real file needs this many units only with a max_unit_rows far below its
// rows per byte.
func maxFileUnits(fileSize int64) int {
	return int(min(fileSize, 1<<40)) + 1024
}

// tooManyUnits is the error for a row group that would be cut into more
// units than its file justifies (maxFileUnits).
func tooManyUnits(rows, max, size int64) error {
	return corruptf("row group of %d rows cut into units of at most %d rows makes more units than a file of %d bytes justifies (%d): the file's row count is wrong, or max_unit_rows is far too small for it (raise it)",
		rows, max, size, maxFileUnits(size))
}

// chunkOf describes field f's column chunk in row group g: for a field
// the file lacks, an absent chunk of one null level a row.
func chunkOf(g *format.RowGroup, f *Field, fileSize int64) (Chunk, error) {
	if f.Absent {
		return Chunk{Leaf: -1, Absent: true, Values: g.NumRows, Default: f.Default}, nil
	}
	if f.Leaf < 0 || f.Leaf >= len(g.Columns) {
		return Chunk{}, corruptf("row group has %d column chunks, leaf %d wanted", len(g.Columns), f.Leaf)
	}
	cc := &g.Columns[f.Leaf]
	md := &cc.MetaData
	if cc.FilePath != "" {
		return Chunk{}, fmt.Errorf("%w: column chunk in external file %q", ErrUnsupported, cc.FilePath)
	}
	if len(md.PathInSchema) > 0 && !slices.Equal([]string(md.PathInSchema), f.Path) {
		return Chunk{}, corruptf("column chunk path %q, schema path %q", md.PathInSchema, f.Path)
	}
	if !codecSupported(int32(md.Codec)) {
		return Chunk{}, fmt.Errorf("%w: compression codec %s", ErrUnsupported, codecName(int32(md.Codec)))
	}
	start := md.DataPageOffset
	if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < start {
		start = md.DictionaryPageOffset
	}
	end := start + md.TotalCompressedSize
	if start < 4 || md.TotalCompressedSize < 0 || end > fileSize-8 || end < start {
		return Chunk{}, corruptf("column chunk [%d, %d) outside the file of %d bytes", start, end, fileSize)
	}
	c := Chunk{
		Leaf: f.Leaf, Codec: int32(md.Codec), Offset: start, End: end,
		Values: md.NumValues, Uncompressed: md.TotalUncompressedSize,
		Physical: f.StoredPhysical, TypeLen: f.StoredTypeLen,
	}
	// The OffsetIndex, where it lies inside the file; the decoder reads
	// it only for selections, and ignores one that does not fit.
	if cc.OffsetIndexLength > 0 && cc.OffsetIndexLength <= maxIndexBytes && cc.OffsetIndexOffset >= 4 && cc.OffsetIndexOffset+int64(cc.OffsetIndexLength) <= fileSize-8 {
		c.Index, c.IndexLen = cc.OffsetIndexOffset, cc.OffsetIndexLength
		if cc.ColumnIndexLength > 0 && cc.ColumnIndexLength <= maxIndexBytes && cc.ColumnIndexOffset >= 4 && cc.ColumnIndexOffset+int64(cc.ColumnIndexLength) <= fileSize-8 {
			c.ColIndex, c.ColIndexLen = cc.ColumnIndexOffset, cc.ColumnIndexLength
		}
	}
	return c, nil
}

// sliceRowGroup cuts a row group into units of at most opts.MaxUnitRows
// rows. With an OffsetIndex for every projected column, cuts fall on page
// boundaries of the column with the most uncompressed bytes (so that it
// needs no trimming) and every column reads only the pages covering the
// slice; otherwise cuts are even and columns decode from the chunk start.
//
// It cuts at most limit units, and fails if the row group needs more.
func sliceRowGroup(ctx context.Context, f io.ReaderAt, size int64, g *format.RowGroup, fields []Field, base Unit, opts PlanOptions, limit int) ([]Unit, error) {
	max := opts.MaxUnitRows
	if max <= 0 || g.NumRows <= max {
		return []Unit{base}, nil
	}
	if g.NumRows/max >= int64(limit) {
		return nil, tooManyUnits(g.NumRows, max, size)
	}
	var ois []*format.OffsetIndex
	if !opts.IgnoreOffsetIndex && len(fields) > 0 {
		for i := range fields {
			if fields[i].Absent {
				ois = append(ois, nil) // no pages to cut
				continue
			}
			oi, err := readOffsetIndex(f, size, &g.Columns[fields[i].Leaf])
			if err != nil {
				return nil, err
			}
			if oi == nil || !validOffsetIndex(oi, &base.Chunks[i], g.NumRows) {
				ois = nil
				break
			}
			// Units start decoding at the page the index says holds
			// their first row, counting rows from its first_row_index:
			// the index must agree with the page headers.
			if err := checkOffsetIndex(ctx, f, oi, &fields[i], g.NumRows); err != nil {
				return nil, &Error{Column: fields[i].Name, RowGroup: -1, PageOffset: -1, Err: err}
			}
			ois = append(ois, oi)
		}
	}
	if !slices.ContainsFunc(ois, func(oi *format.OffsetIndex) bool { return oi != nil }) {
		ois = nil // every field absent: even cuts
	}
	var cuts []int64 // slice starts, then NumRows
	if ois == nil {
		// Without overflow for any row count: k*NumRows/n in 128 bits
		// (k < n, so the quotient is below NumRows).
		n := g.NumRows / max
		if g.NumRows%max != 0 {
			n++
		}
		for k := range n {
			hi, lo := bits.Mul64(uint64(k), uint64(g.NumRows))
			q, _ := bits.Div64(hi, lo, uint64(n))
			cuts = append(cuts, int64(q))
		}
	} else {
		heavy := -1
		for i := range fields {
			if ois[i] != nil && (heavy < 0 || base.Chunks[i].Uncompressed > base.Chunks[heavy].Uncompressed) {
				heavy = i
			}
		}
		locs := ois[heavy].PageLocations
		j := 0 // the first page starting past s+max; cuts only move it on
		for s := int64(0); s < g.NumRows; {
			if len(cuts) >= limit {
				return nil, tooManyUnits(g.NumRows, max, size)
			}
			if len(cuts)%4096 == 0 && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			cuts = append(cuts, s)
			next := s + max
			if next >= g.NumRows {
				break
			}
			// The last page boundary in (s, s+max]; else cut mid-page.
			// The index's first rows increase (validOffsetIndex).
			for j < len(locs) && locs[j].FirstRowIndex <= s+max {
				j++
				sliceSteps.Add(1)
			}
			if j > 0 && locs[j-1].FirstRowIndex > s {
				next = locs[j-1].FirstRowIndex
			}
			s = next
		}
	}
	cuts = append(cuts, g.NumRows)
	units := make([]Unit, 0, len(cuts)-1)
	for k := 0; k+1 < len(cuts); k++ {
		if k%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		u := base
		u.RowStart, u.Rows = cuts[k], cuts[k+1]-cuts[k]
		u.Chunks = slices.Clone(base.Chunks)
		if ois != nil {
			for i := range u.Chunks {
				if ois[i] != nil {
					narrowChunk(&u.Chunks[i], ois[i], u.RowStart, u.RowStart+u.Rows)
				}
			}
		}
		units = append(units, u)
	}
	return units, nil
}

// checkOffsetIndex reads the header of every page oi lists (a small read
// each) and checks that each is a data page of the size and rows the
// index says (checkIndexedPage): the index is the writer's word, and a
// first_row_index that lies would have sliced units read other rows than
// the ones they claim, silently.
func checkOffsetIndex(ctx context.Context, f io.ReaderAt, oi *format.OffsetIndex, field *Field, groupRows int64) error {
	var buf []byte
	var h pageHeader
	locs := oi.PageLocations
	for k, l := range locs {
		if k%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		end := groupRows
		if k+1 < len(locs) {
			end = locs[k+1].FirstRowIndex
		}
		hn, err := indexedHeader(f, &buf, l.Offset, int64(l.CompressedPageSize), &h)
		if err != nil {
			return err
		}
		if err := checkIndexedPage(field, &h, hn, l.Offset, int64(l.CompressedPageSize), end-l.FirstRowIndex); err != nil {
			return err
		}
	}
	return nil
}

// sliceSteps counts the steps sliceRowGroup takes over OffsetIndex page
// locations (the cut walk and narrowChunk's searches), so that a test can
// hold slicing to units x log pages rather than units x pages.
var sliceSteps atomic.Int64

func validOffsetIndex(oi *format.OffsetIndex, c *Chunk, rows int64) bool {
	locs := oi.PageLocations
	if len(locs) == 0 || locs[0].FirstRowIndex != 0 {
		return false
	}
	for i, l := range locs {
		if l.Offset < c.Offset || l.CompressedPageSize <= 0 || l.Offset+int64(l.CompressedPageSize) > c.End ||
			l.FirstRowIndex >= rows || (i > 0 && (l.FirstRowIndex <= locs[i-1].FirstRowIndex || l.Offset <= locs[i-1].Offset)) {
			return false
		}
	}
	return true
}

// narrowChunk restricts c to the pages covering rows [lo, hi) of the row
// group, keeping any dictionary page in front of the first data page.
func narrowChunk(c *Chunk, oi *format.OffsetIndex, lo, hi int64) {
	locs := oi.PageLocations
	// The index's first rows increase from 0 (validOffsetIndex): the
	// last page starting at or before lo, and the last before hi, by
	// binary search, so that slicing a row group costs units x log pages.
	first := sort.Search(len(locs), func(i int) bool { sliceSteps.Add(1); return locs[i].FirstRowIndex > lo }) - 1
	last := sort.Search(len(locs), func(i int) bool { sliceSteps.Add(1); return locs[i].FirstRowIndex >= hi }) - 1
	first, last = max(first, 0), max(last, 0)
	if d := locs[0].Offset - c.Offset; d > 0 {
		c.DictOffset, c.DictLen = c.Offset, d
	}
	c.Offset = locs[first].Offset
	c.FirstRow = locs[first].FirstRowIndex
	c.End = locs[last].Offset + int64(locs[last].CompressedPageSize)
}
