package iceberg

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	ice "github.com/apache/iceberg-go"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/expr"
)

// Scan is a snapshot's data files, as a job reads them.
type Scan struct {
	// Table names the table in errors: the spec text without snapshot.
	Table string
	// SnapshotID is the snapshot read: the one asked for, or the current
	// one at the time of the scan.
	SnapshotID int64
	// Files are the snapshot's live data files, sorted by path.
	Files []File
	// Buckets is how the table's files are bucketed, nil when they are
	// not: every file's partition has a bucket[N] value of that column.
	Buckets *Bucketing
	// DeletedRows is the number of rows of Files that the snapshot's
	// position deletes remove (deletes.go).
	DeletedRows int64
	// Schema is how the snapshot's schema names its files' top-level
	// columns: their field ids, and the table's name mapping for files
	// that store none (decode.PlanOptions.Table). Its data files are read
	// through it, whatever a column was named when a file was written.
	Schema *decode.TableSchema

	listed    map[string]struct{} // the data files' paths, while the manifests are read
	deletes   []deleteFile        // the snapshot's position delete files
	eqDeletes []*eqDelete         // and its equality delete files (eqdeletes.go)
	vectors   []dvDelete          // and its deletion vectors (dvdeletes.go)
}

// Bucketing says that every data file holds the rows of one bucket of a
// column: Iceberg's bucket[N] transform (murmur3 of the value, modulo N).
type Bucketing struct {
	Column string // top-level source column
	N      int    // number of buckets
}

// File is one data file of a snapshot.
type File struct {
	// Path is the name decode.FS opens: a local path or an s3:// URL.
	Path string
	Rows int64
	Size int64
	// Bucket is the file's bucket under Scan.Buckets, -1 without.
	Bucket int
	// Deleted are the positions (row indexes in the file) that the
	// snapshot's position deletes remove, sorted, without repeats.
	Deleted []int64
	seq     int64       // data sequence number
	specID  int32       // partition spec
	part    map[int]any // partition values, by partition field id
	// partDefaults are its identity partition values, by source field id,
	// PLAIN-encoded: what the columns it lacks read (partconst.go).
	partDefaults map[int32][]byte
	// stats maps a top-level column name to what the file's partition
	// value (identity transforms) or column statistics say about it.
	stats map[string]expr.Range
}

// Stats returns what the file's metadata says about a top-level column:
// bounds (exact for an identity partition column) and null count. It has
// the signature ops.Program.Prune takes.
func (f *File) Stats(col string) (expr.Range, bool) {
	r, ok := f.stats[col]
	return r, ok
}

// Prune keeps the files for which keep (a job's Program.Prune) says a row
// may survive the job's filters, and returns them with the number left
// out.
func (s *Scan) Prune(keep func(stats func(col string) (expr.Range, bool)) bool) (kept []File, skipped int) {
	for i := range s.Files {
		if keep(s.Files[i].Stats) {
			kept = append(kept, s.Files[i])
		} else {
			skipped++
		}
	}
	return kept, skipped
}

// Paths returns the files' paths, in order.
func Paths(files []File) []string {
	out := make([]string, len(files))
	for i := range files {
		out[i] = files[i].Path
	}
	return out
}

// ScanSnapshot lists the live data files of snapshot id (0: the current
// one) of the table m, reading its manifest list and manifests through
// fsys, with the rows its position delete files remove (deletes.go). A
// snapshot with equality deletes or deletion vectors, or with data files
// other than Parquet, is refused: lastmile would return deleted rows, or
// could not read them.
func ScanSnapshot(ctx context.Context, fsys decode.FS, name string, m *Metadata, id int64) (*Scan, error) {
	snap, err := m.Snapshot(id)
	if err != nil {
		return nil, fmt.Errorf("iceberg table %s: %w", name, err)
	}
	// fail keeps what it wraps (%w): a permission error stays one, so that
	// lastmiled refuses a user's job with 403 naming the file.
	fail := func(format string, args ...any) error {
		return fmt.Errorf("iceberg table %s snapshot %d: "+format, append([]any{name, snap.ID}, args...)...)
	}
	schemaID := m.CurrentSchemaID
	if snap.SchemaID != nil {
		schemaID = *snap.SchemaID
	}
	schema := m.schema(schemaID)
	if schema == nil {
		return nil, fail("no schema with id %d", schemaID)
	}
	data, err := readLocation(fsys, snap.ManifestList)
	if err != nil {
		return nil, fail("manifest list: %w", err)
	}
	manifests, err := readManifestList(data)
	if err != nil {
		return nil, fail("manifest list %s: %v", snap.ManifestList, err)
	}
	s := &Scan{Table: name, SnapshotID: snap.ID, Schema: &decode.TableSchema{IDs: map[string]int32{}}}
	s.Schema.Stored, s.Schema.Nullable, s.Schema.Defaults = storedColumns(schema)
	for _, f := range schema.Fields() {
		s.Schema.IDs[f.Name] = int32(f.ID)
		s.Schema.Order = append(s.Schema.Order, f.Name)
	}
	if s.Schema.Mapped, err = m.nameMapping(); err != nil {
		return nil, fail("%v", err)
	}
	bk := bucketState{}
	for _, mf := range manifests {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		spec := m.spec(int(mf.PartitionSpecID()))
		if spec == nil {
			return nil, fail("manifest %s: no partition spec with id %d", mf.FilePath(), mf.PartitionSpecID())
		}
		if err := s.addManifest(fsys, mf, schema, spec, &bk); err != nil {
			return nil, fail("%w", err)
		}
	}
	s.listed = nil
	if err := s.applyDeletes(ctx, fsys); err != nil {
		return nil, fail("%w", err)
	}
	slices.SortFunc(s.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	s.Buckets = bk.result()
	if s.Buckets == nil {
		for i := range s.Files {
			s.Files[i].Bucket = -1
		}
	}
	return s, nil
}

// addManifest appends the live data files of one manifest, or notes the
// delete files of a delete manifest.
func (s *Scan) addManifest(fsys decode.FS, mf ice.ManifestFile, schema *ice.Schema, spec *ice.PartitionSpec, bk *bucketState) error {
	data, err := readLocation(fsys, mf.FilePath())
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	// The entries are counted as they are decoded: a manifest's deflate
	// blocks make thousands of entries of a few bytes, each some hundreds
	// of bytes once decoded, so that its size bounds nothing.
	deletes := mf.ManifestContent() == ice.ManifestContentDeletes
	room := decode.MaxFiles - len(s.Files)
	if deletes {
		room = decode.MaxFiles - len(s.deletes) - len(s.eqDeletes) - len(s.vectors)
	}
	entries, err := readManifest(mf, data, room)
	if errors.Is(err, errTooManyEntries) {
		if deletes {
			return fmt.Errorf("more than %d delete files: compact the table first (Spark: CALL system.rewrite_data_files with delete-file-threshold)", decode.MaxFiles)
		}
		return fmt.Errorf("more than %d data files: lastmile reads at most that many files of an input; compact the table (Spark: CALL system.rewrite_data_files)", decode.MaxFiles)
	}
	if err != nil {
		return fmt.Errorf("manifest %s: %v", mf.FilePath(), err)
	}
	if deletes {
		return s.noteDeletes(entries, mf.FilePath(), schema, spec)
	}
	for _, e := range entries {
		df := e.DataFile()
		if df.ContentType() != ice.EntryContentData {
			return fmt.Errorf("data manifest %s lists delete file %s", mf.FilePath(), df.FilePath())
		}
		if df.FileFormat() != ice.ParquetFile {
			return fmt.Errorf("data file %s is %s: lastmile reads Parquet data files only", df.FilePath(), df.FileFormat())
		}
		path, err := localOrURL(df.FilePath())
		if err != nil {
			return fmt.Errorf("data file: %v", err)
		}
		f := File{Path: path, Rows: df.Count(), Size: df.FileSizeBytes(), stats: fileStats(df, schema, spec), seq: e.SequenceNum(),
			specID: df.SpecID(), part: df.Partition(), partDefaults: partitionDefaults(df, schema, spec)}
		// Iceberg lists a live data file once. A file listed twice would
		// be read twice, and a manifest list naming one manifest over and
		// over would multiply the scan's memory without bound.
		if _, dup := s.listed[path]; dup {
			return fmt.Errorf("data file %s is listed twice (manifest %s, and another or the same manifest before it): the table's metadata is damaged", df.FilePath(), mf.FilePath())
		}
		if len(s.Files) >= decode.MaxFiles {
			return fmt.Errorf("more than %d data files: lastmile reads at most that many files of an input; compact the table (Spark: CALL system.rewrite_data_files)", decode.MaxFiles)
		}
		if s.listed == nil {
			s.listed = map[string]struct{}{}
		}
		s.listed[path] = struct{}{}
		f.Bucket = bk.note(df, schema, spec)
		s.Files = append(s.Files, f)
	}
	return nil
}

// readManifestList and readManifest run iceberg-go's Avro readers,
// turning a panic on a damaged file into an error: FuzzScanManifests
// found a nil dereference in iceberg-go v0.7.0 (getFieldIDMap) for a
// manifest whose Avro schema was cut, which would have stopped a
// `lastmile run` and failed a daemon's job as a bug rather than saying
// the file is damaged.
func readManifestList(data []byte) (list []ice.ManifestFile, err error) {
	defer recoverDamaged(&err)
	// Bounded before iceberg-go decodes it whole (avrobound.go): no more
	// manifests than an input may have files.
	if err := avroBound(data, decode.MaxFiles, MaxMetadataBytes); err != nil {
		return nil, err
	}
	return ice.ReadManifestList(bytes.NewReader(data))
}

func readManifest(mf ice.ManifestFile, data []byte, max int) (entries []ice.ManifestEntry, err error) {
	defer recoverDamaged(&err)
	// Its entries are counted as they are read (max); their bytes, which
	// a few entries of long strings would fill, are bounded here.
	if err := avroBound(data, math.MaxInt64, MaxMetadataBytes); err != nil {
		return nil, err
	}
	rd, err := ice.NewManifestReader(mf, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	for {
		e, err := rd.ReadEntry()
		if errors.Is(err, io.EOF) {
			return entries, nil
		}
		if err != nil {
			return nil, err
		}
		if e.Status() == ice.EntryStatusDELETED {
			continue
		}
		if len(entries) >= max {
			return nil, errTooManyEntries
		}
		entries = append(entries, e)
	}
}

// errTooManyEntries is readManifest's: the manifest lists more live files
// than the scan has room for.
var errTooManyEntries = errors.New("too many manifest entries")

func recoverDamaged(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("the file is damaged: the Iceberg reader failed on it (%v)", r)
	}
}

// bucketState finds whether every file has a bucket[N] partition value of
// one column (the same column and N for all).
type bucketState struct {
	col   string
	n     int
	mixed bool // some file has none, or another column or N
	seen  bool
}

func (b *bucketState) note(df ice.DataFile, schema *ice.Schema, spec *ice.PartitionSpec) int {
	part := df.Partition()
	for _, pf := range spec.Fields() {
		bt, ok := pf.Transform.(ice.BucketTransform)
		if !ok {
			continue
		}
		src, ok := topLevel(schema, pf.SourceID())
		v, has := part[pf.FieldID].(int32)
		if !ok || !has {
			continue
		}
		switch {
		case !b.seen:
			b.col, b.n, b.seen = src, bt.NumBuckets, true
		case b.col != src || b.n != bt.NumBuckets:
			b.mixed = true
		}
		return int(v)
	}
	b.mixed = true
	return -1
}

func (b *bucketState) result() *Bucketing {
	if !b.seen || b.mixed {
		return nil
	}
	return &Bucketing{Column: b.col, N: b.n}
}

// topLevel returns the name of a top-level column by field id.
func topLevel(schema *ice.Schema, id int) (string, bool) {
	for _, f := range schema.Fields() {
		if f.ID == id {
			return f.Name, true
		}
	}
	return "", false
}

// fileStats gathers what a data file's metadata says about its top-level
// columns: the identity partition values (exact bounds), then the lower
// and upper bounds and null counts of its column statistics.
func fileStats(df ice.DataFile, schema *ice.Schema, spec *ice.PartitionSpec) map[string]expr.Range {
	out := map[string]expr.Range{}
	lower, upper, nulls, nans := df.LowerBoundValues(), df.UpperBoundValues(), df.NullValueCounts(), df.NaNValueCounts()
	for _, f := range schema.Fields() {
		r := expr.Range{NullCount: -1, Rows: df.Count()}
		if n, ok := nulls[f.ID]; ok {
			r.NullCount = n
		}
		lo, okLo := lower[f.ID]
		hi, okHi := upper[f.ID]
		if okLo && okHi && nanFree(f.Type, nans, f.ID) {
			r.Min, r.MinString, okLo = boundOf(f.Type, lo)
			r.Max, r.MaxString, okHi = boundOf(f.Type, hi)
			r.HasBounds = okLo && okHi
		}
		if r.HasBounds || r.NullCount >= 0 {
			out[f.Name] = r
		}
	}
	part := df.Partition()
	for _, pf := range spec.Fields() {
		if _, ok := pf.Transform.(ice.IdentityTransform); !ok {
			continue
		}
		name, ok := topLevel(schema, pf.SourceID())
		if !ok {
			continue
		}
		v, present := part[pf.FieldID]
		r := expr.Range{Rows: df.Count()}
		if !present || v == nil {
			r.NullCount = df.Count() // an identity partition of null: every value is null
			out[name] = r
			continue
		}
		if r.Min, r.MinString, ok = valueOf(v); ok {
			r.Max, r.MaxString, r.HasBounds, r.NullCount = r.Min, r.MinString, true, 0
			out[name] = r
		}
	}
	return out
}

// nanFree reports whether a column's bounds may be trusted as bounds of
// all its values: always for non-floats, for floats only when the file
// says it holds no NaN.
func nanFree(t ice.Type, nans map[int]int64, id int) bool {
	switch t.(type) {
	case ice.Float32Type, ice.Float64Type:
		n, ok := nans[id]
		return ok && n == 0
	}
	return true
}

// boundOf decodes an Iceberg single-value serialization (a column bound)
// of the types a filter compares: integers, floats, booleans, strings.
func boundOf(t ice.Type, b []byte) (float64, string, bool) {
	switch t.(type) {
	case ice.Int32Type, ice.Int64Type, ice.Float32Type, ice.Float64Type, ice.BooleanType, ice.StringType,
		ice.DateType, ice.TimestampType, ice.TimestampTzType, ice.TimestampNsType, ice.TimestampTzNsType:
		// Dates are int32 days, timestamps int64 micro- or nanoseconds
		// since 1970: the numbers their Parquet columns decode to, so a
		// filter such as ts >= timestamp("2025-11-20", "us") prunes by
		// them (nanoseconds of today exceed 2^53 and never bound).
	default:
		return 0, "", false
	}
	if len(b) == 4 {
		// A long or double promoted from an int or float since the file
		// was written: its bounds are the older type's (the spec's
		// binary serialization of promoted values).
		switch t.(type) {
		case ice.Int64Type:
			t = ice.PrimitiveTypes.Int32
		case ice.Float64Type:
			t = ice.PrimitiveTypes.Float32
		case ice.TimestampType, ice.TimestampTzType:
			return dayBound(b, 86400e6) // format v3: a date made a timestamp
		case ice.TimestampNsType, ice.TimestampTzNsType:
			return dayBound(b, 86400e9)
		}
	}
	lit, err := ice.LiteralFromBytes(t, b)
	if err != nil {
		return 0, "", false
	}
	return valueOf(lit.Any())
}

// dayBound is a date's bound b (4 bytes of days) as the first instant of
// its day, counted per day to the day: what a date that the table has
// made a timestamp reads as (decode's promote).
func dayBound(b []byte, per int64) (float64, string, bool) {
	d := int64(int32(binary.LittleEndian.Uint32(b)))
	if d > math.MaxInt64/per || d < -math.MaxInt64/per {
		return 0, "", false
	}
	return valueOf(d * per)
}

// valueOf turns a partition value or literal into a Range bound.
func valueOf(v any) (float64, string, bool) {
	switch x := v.(type) {
	case ice.Date:
		return valueOf(int32(x))
	case ice.Timestamp:
		return valueOf(int64(x))
	case ice.TimestampNano:
		return valueOf(int64(x))
	case int32:
		return float64(x), "", true
	case int64:
		if x > 1<<53 || x < -(1<<53) {
			return 0, "", false // not exact as a float64
		}
		return float64(x), "", true
	case float32:
		return float64(x), "", !math.IsNaN(float64(x))
	case float64:
		return x, "", !math.IsNaN(x)
	case bool:
		if x {
			return 1, "", true
		}
		return 0, "", true
	case string:
		return 0, x, true
	}
	return 0, "", false
}

// BucketInt is Iceberg's bucket[n] of an integer value (int32 values hash
// as int64, as the Iceberg spec says).
func BucketInt(n int, v int64) int {
	return int(ice.BucketTransform{NumBuckets: n}.Transformer(ice.PrimitiveTypes.Int64)(v).Val)
}

// BucketBytes is Iceberg's bucket[n] of a string or binary value.
func BucketBytes(n int, v []byte) int {
	return int(ice.BucketTransform{NumBuckets: n}.Transformer(ice.PrimitiveTypes.Binary)(v).Val)
}
