package iceberg

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	ice "github.com/apache/iceberg-go"
	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
)

// Equality deletes.
//
// An equality delete file (what Flink's upserts and CDC streams write)
// holds rows of some of the table's columns, its equality fields: every
// row of a data file whose values in those columns equal a delete row's
// (null equal to null) is deleted. It applies to a data file whose data
// sequence number is strictly less than its own, and only within its
// partition, unless it was written under an unpartitioned spec.
//
// lastmile turns them into positions, once per job, for the data files
// the job plans after pruning (EqualityDeleted): each applicable delete
// file's rows are read once into a set of keys, then each affected data
// file's equality columns are read and its matching rows become deleted
// positions, merged with its position deletes. From there on they are
// position deletes: each unit carries its rows, on the host and to a
// peer. The cost is one read of the equality columns of the affected
// data files when a job plans (and the delete rows in memory); `planned`
// logs how many rows were deleted.
//
// A key is the columns' values in their decoded form, one after the
// other: a null as one 0 byte, a value as 1 then its bytes (fixed-width)
// or its length and bytes (strings, binary). Floats are keyed by their
// bits with every NaN made one (canonicalNaN): equal as Iceberg's Java
// reader has them equal, NaN to NaN, -0.0 not to 0.0. The same column
// must decode to the same kind and type in the delete file and the data
// file, or the job fails naming both.
//
// Rejected: applying them as a per-row filter in the engine. The
// equality columns would have to be decoded with every unit even when the
// job does not read them, and a peer would need the delete rows; after
// resolution a peer needs nothing new.

// eqDelete is an equality delete file of a snapshot.
type eqDelete struct {
	path    string
	seq     int64               // data sequence number
	columns []string            // top-level columns of the equality field ids
	schema  *decode.TableSchema // those columns' field ids, by name, and their types now (decode.PlanOptions.Table)
	global  bool                // written under an unpartitioned spec
	specID  int32
	part    map[int]any
	keys    map[string]struct{} // its rows' keys, once loaded
	kinds   []colType           // the columns' decoded kinds and types, once loaded
	// ints holds the keys instead when the delete has one fixed-width
	// column of at most 8 bytes (an id: the common case), as the value's
	// bytes zero-extended; null says a null key was deleted.
	ints map[uint64]struct{}
	null bool
}

// small reports whether c's values are keyed as uint64s.
func small(c *column.Column) bool {
	return c.Kind == column.Fixed && c.DType.Size()*c.Width <= 8
}

// word returns row r of a small column, zero-extended, a float's NaN
// canonical.
func word(c *column.Column, r int) uint64 {
	n := c.DType.Size() * c.Width
	var b [8]byte
	copy(b[:], c.Data[r*n:(r+1)*n])
	canonicalNaN(c.DType, b[:n])
	return binary.LittleEndian.Uint64(b[:])
}

// canonicalNaN rewrites every NaN among the float values in b (little
// endian, of type dt) as the one quiet NaN Java's floatToIntBits and
// doubleToLongBits give. Iceberg's Java reader matches equality deletes
// with Comparator.naturalOrder, so every NaN equals every NaN, and -0.0
// and 0.0 differ, as their bits do.
func canonicalNaN(dt column.DType, b []byte) {
	switch dt {
	case column.Float32:
		for i := 0; i+4 <= len(b); i += 4 {
			if v := math.Float32frombits(binary.LittleEndian.Uint32(b[i:])); v != v {
				binary.LittleEndian.PutUint32(b[i:], 0x7fc00000)
			}
		}
	case column.Float64:
		for i := 0; i+8 <= len(b); i += 8 {
			if math.IsNaN(math.Float64frombits(binary.LittleEndian.Uint64(b[i:]))) {
				binary.LittleEndian.PutUint64(b[i:], 0x7ff8000000000000)
			}
		}
	}
}

// has reports whether row r of the data columns at is deleted; key is
// scratch.
func (d *eqDelete) has(at []*column.Column, r int, key *[]byte) bool {
	if d.ints != nil {
		c := at[0]
		if c.Valid != nil && c.Valid[r] == 0 {
			return d.null
		}
		_, ok := d.ints[word(c, r)]
		return ok
	}
	*key = appendKey((*key)[:0], at, r)
	_, ok := d.keys[string(*key)]
	return ok
}

// add records row r of the delete file's columns at.
func (d *eqDelete) add(at []*column.Column, r int, key *[]byte) {
	if d.ints != nil {
		c := at[0]
		if c.Valid != nil && c.Valid[r] == 0 {
			d.null = true
			return
		}
		d.ints[word(c, r)] = struct{}{}
		return
	}
	*key = appendKey((*key)[:0], at, r)
	d.keys[string(*key)] = struct{}{}
}

// empty reports whether d deletes nothing.
func (d *eqDelete) empty() bool { return len(d.keys) == 0 && len(d.ints) == 0 && !d.null }

type colType struct {
	kind  column.Kind
	dtype column.DType
}

// noteEquality records an equality delete file of a delete manifest.
func (s *Scan) noteEquality(e ice.ManifestEntry, manifest string, schema *ice.Schema, spec *ice.PartitionSpec) error {
	df := e.DataFile()
	if df.FileFormat() != ice.ParquetFile {
		return fmt.Errorf("delete file %s is %s: lastmile reads Parquet delete files only", df.FilePath(), df.FileFormat())
	}
	ids := df.EqualityFieldIDs()
	if len(ids) == 0 {
		return fmt.Errorf("equality delete file %s (in manifest %s) names no equality fields", df.FilePath(), manifest)
	}
	d := &eqDelete{seq: e.SequenceNum(), global: unpartitioned(spec), specID: df.SpecID(), part: df.Partition(),
		schema: &decode.TableSchema{IDs: map[string]int32{}, Stored: s.Schema.Stored}}
	var err error
	if d.path, err = localOrURL(df.FilePath()); err != nil {
		return fmt.Errorf("delete file: %v", err)
	}
	for _, id := range ids {
		name, top, err := equalityColumn(schema, id)
		if err != nil {
			return fmt.Errorf("equality delete file %s: %w; "+
				"compact the table first (Spark: CALL system.rewrite_data_files with delete-file-threshold)", df.FilePath(), err)
		}
		if name != top.Name && s.Schema.Stored[int32(top.ID)] == nil {
			// Without the struct's shape the decoder would find the
			// member by name, not by field id.
			return fmt.Errorf("equality delete file %s: column %q is a member of %q, a struct whose type lastmile cannot describe "+
				"(a member of a type it does not read), so its members cannot be found by field id; "+
				"compact the table first (Spark: CALL system.rewrite_data_files with delete-file-threshold)", df.FilePath(), name, top.Name)
		}
		d.columns = append(d.columns, name)
		d.schema.IDs[top.Name] = int32(top.ID)
	}
	s.eqDeletes = append(s.eqDeletes, d)
	return nil
}

// equalityColumn is the column that equality field id names: a top-level
// column, or a member of structs named by its dotted path ("user.id"),
// which the decoder resolves by the ids of the top-level column (top)
// and of each member (decode's fieldmember.go), whatever their names in
// a file. A field inside a list or map, or not of a primitive type, is
// an error.
func equalityColumn(schema *ice.Schema, id int) (name string, top ice.NestedField, err error) {
	f, ok := schema.FindFieldByID(id)
	if !ok {
		return "", top, fmt.Errorf("field %d is not in the table's schema", id)
	}
	switch f.Type.(type) {
	case *ice.StructType, *ice.ListType, *ice.MapType:
		return "", top, fmt.Errorf("column %q is %s; lastmile applies equality deletes on columns of primitive types", f.Name, f.Type)
	}
	for _, t := range schema.Fields() {
		path, ok := memberPath(t, id)
		if !ok {
			continue
		}
		name := strings.Join(path, ".")
		if len(path) > 1 && (strings.Count(name, ".") != len(path)-1 || slices.ContainsFunc(schema.Fields(), func(f ice.NestedField) bool { return f.Name == name })) {
			// The decoder takes a member by its dotted path, and a name
			// holding a dot, or a top-level column named as the path,
			// would make it read another column.
			return "", t, fmt.Errorf("field %d: its path %q is ambiguous (a name in it holds a dot, or a top-level column has that name); "+
				"lastmile applies equality deletes on struct members whose path names them alone", id, name)
		}
		return name, t, nil
	}
	return "", top, fmt.Errorf("field %d (%q) is inside a list or map; lastmile applies equality deletes on columns and struct members only", id, f.Name)
}

// memberPath is the names from f down to field id through structs only.
func memberPath(f ice.NestedField, id int) ([]string, bool) {
	if f.ID == id {
		return []string{f.Name}, true
	}
	st, ok := f.Type.(*ice.StructType)
	if !ok {
		return nil, false
	}
	for _, m := range st.FieldList {
		if path, ok := memberPath(m, id); ok {
			return append([]string{f.Name}, path...), true
		}
	}
	return nil, false
}

// unpartitioned reports whether spec partitions nothing: it has no
// fields, or only void ones (what format 1 makes of a dropped partition
// field). A delete written under it applies to every partition, as
// Java's PartitionSpec.isUnpartitioned and DeleteFileIndex have it.
func unpartitioned(spec *ice.PartitionSpec) bool {
	for _, f := range spec.Fields() {
		if _, void := f.Transform.(ice.VoidTransform); !void {
			return false
		}
	}
	return true
}

// appliesTo reports whether d deletes rows of data file f.
func (d *eqDelete) appliesTo(f *File) bool {
	if f.seq >= d.seq {
		return false
	}
	return d.global || (d.specID == f.specID && reflect.DeepEqual(d.part, f.part))
}

// EqualityDeleted returns, for each data file in paths (the files a job
// plans) that a snapshot's equality deletes apply to, the positions they
// delete, sorted, merged with its position deletes; files without
// equality deletes are not in it (Deletes gives theirs).
func EqualityDeleted(ctx context.Context, fsys decode.FS, ins []Input, paths []string) (map[string][]int64, error) {
	want := make(map[string]bool, len(paths))
	for _, p := range paths {
		want[p] = true
	}
	var out map[string][]int64
	var total int64
	for _, in := range ins {
		s := in.Scan
		if s == nil || len(s.eqDeletes) == 0 {
			continue
		}
		for i := range s.Files {
			f := &s.Files[i]
			if !want[f.Path] {
				continue
			}
			// Files times delete files: a table's metadata may hold many
			// of both, so the caller's deadline (planning's) stops it.
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			var apply []*eqDelete
			for _, d := range s.eqDeletes {
				if d.appliesTo(f) {
					apply = append(apply, d)
				}
			}
			if len(apply) == 0 {
				continue
			}
			pos, err := s.matchFile(ctx, fsys, f, apply, &total)
			if err != nil {
				return nil, fmt.Errorf("iceberg table %s snapshot %d: %w", s.Table, s.SnapshotID, err)
			}
			if len(pos) == 0 {
				continue
			}
			if out == nil {
				out = map[string][]int64{}
			}
			out[f.Path] = pos
		}
	}
	return out, nil
}

// matchFile returns the rows of data file f that the delete files apply
// deletes, with its position deletes, sorted and without repeats.
func (s *Scan) matchFile(ctx context.Context, fsys decode.FS, f *File, apply []*eqDelete, total *int64) ([]int64, error) {
	var cols []string
	loaded := apply[:0:0]
	for _, d := range apply {
		if err := d.load(ctx, fsys, total); err != nil {
			return nil, fmt.Errorf("equality delete file %s: %w", d.path, err)
		}
		if d.empty() {
			continue // an empty delete file
		}
		loaded = append(loaded, d)
		for _, c := range d.columns {
			if !slices.Contains(cols, c) {
				cols = append(cols, c)
			}
		}
	}
	if len(loaded) == 0 {
		return slices.Clone(f.Deleted), nil
	}
	apply = loaded
	// By field id: a column renamed since the file was written; the
	// file's identity partition values for the columns it lacks, as the
	// job reads them (SchemaOf).
	table := func(string) *decode.TableSchema { return s.SchemaOf(f) }
	plan, err := decode.PlanFiles(ctx, []string{f.Path}, decode.PlanOptions{FS: fsys, Columns: cols, Table: table, Listed: true})
	if err != nil {
		return nil, err
	}
	dec := plan.NewDecoder()
	defer dec.Close()
	pos := slices.Clone(f.Deleted)
	var b column.Batch
	var key []byte
	for _, u := range plan.Units {
		if err := dec.Decode(ctx, u, &b); err != nil {
			return nil, err
		}
		for _, d := range apply {
			at, err := d.columnsIn(&b, cols, f.Path)
			if err != nil {
				return nil, err
			}
			for r := range b.Rows {
				if d.has(at, r, &key) {
					pos = append(pos, u.Ordinal+int64(r))
				}
			}
		}
	}
	slices.Sort(pos)
	pos = slices.Compact(pos)
	if *total += int64(len(pos) - len(f.Deleted)); *total > MaxDeletedRows {
		return nil, fmt.Errorf("more than the %d deleted rows lastmile holds; compact the table first (Spark: CALL system.rewrite_data_files with delete-file-threshold)", MaxDeletedRows)
	}
	return pos, nil
}

// columnsIn returns d's columns of a data file's batch b (decoded with
// cols), checking that they decode as the delete file's do.
func (d *eqDelete) columnsIn(b *column.Batch, cols []string, file string) ([]*column.Column, error) {
	at := make([]*column.Column, len(d.columns))
	for k, name := range d.columns {
		c := &b.Columns[slices.Index(cols, name)]
		if c.Kind != d.kinds[k].kind || c.DType != d.kinds[k].dtype {
			return nil, fmt.Errorf("column %q is %s %s in data file %s and %s %s in equality delete file %s",
				name, c.Kind, c.DType, file, d.kinds[k].kind, d.kinds[k].dtype, d.path)
		}
		at[k] = c
	}
	return at, nil
}

// load reads d's rows into its key set, once; total counts the delete
// rows and deleted rows held.
func (d *eqDelete) load(ctx context.Context, fsys decode.FS, total *int64) error {
	if d.keys != nil || d.ints != nil {
		return nil
	}
	table := func(string) *decode.TableSchema { return d.schema }
	plan, err := decode.PlanFiles(ctx, []string{d.path}, decode.PlanOptions{FS: fsys, Columns: d.columns, Table: table, Listed: true})
	if err != nil {
		return err
	}
	// plan.Rows is the files' word (up to 2^63-1): compared, not added
	// first, so that a huge claim cannot wrap the sum round.
	if plan.Rows < 0 || plan.Rows > MaxDeletedRows-*total {
		return fmt.Errorf("more than the %d delete rows lastmile holds; compact the table first (Spark: CALL system.rewrite_data_files with delete-file-threshold)", MaxDeletedRows)
	}
	*total += plan.Rows
	dec := plan.NewDecoder()
	defer dec.Close()
	d.keys = map[string]struct{}{}
	var b column.Batch
	var key []byte
	for _, u := range plan.Units {
		if err := dec.Decode(ctx, u, &b); err != nil {
			return err
		}
		at := make([]*column.Column, len(b.Columns))
		d.kinds = d.kinds[:0]
		for k := range b.Columns {
			c := &b.Columns[k]
			if c.Kind == column.List {
				return fmt.Errorf("column %q is a list", d.columns[k])
			}
			at[k] = c
			d.kinds = append(d.kinds, colType{c.Kind, c.DType})
		}
		if d.ints == nil && len(d.keys) == 0 && len(at) == 1 && small(at[0]) {
			d.ints = make(map[uint64]struct{}, plan.Rows)
		}
		for r := range b.Rows {
			d.add(at, r, &key)
		}
	}
	return nil
}

// appendKey appends row r's key over cols to dst.
func appendKey(dst []byte, cols []*column.Column, r int) []byte {
	for _, c := range cols {
		if c.Valid != nil && c.Valid[r] == 0 {
			dst = append(dst, 0)
			continue
		}
		dst = append(dst, 1)
		if c.Kind == column.Fixed {
			n := c.DType.Size() * c.Width
			dst = append(dst, c.Data[r*n:(r+1)*n]...)
			canonicalNaN(c.DType, dst[len(dst)-n:])
			continue
		}
		v := c.Row(r)
		dst = binary.AppendUvarint(dst, uint64(len(v)))
		dst = append(dst, v...)
	}
	return dst
}
