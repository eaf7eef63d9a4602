// Package icebergtest writes small Iceberg tables on local disk for tests:
// Parquet data files, Avro manifests and manifest lists written with
// iceberg-go's own writers, and table metadata files, one per commit. It
// is for tests only and must never be imported by non-test code outside
// the iceberg packages' tests.
package icebergtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"

	ice "github.com/apache/iceberg-go"
	"github.com/lastmile/lastmile/iceberg"
	"github.com/parquet-go/parquet-go"
)

// Row is a row of a test table: schema id long, part string, key long,
// score double (field ids 1 to 4, which the data files store, as
// Iceberg's writers do), and after AddColumns weight double and tags
// list<long> (field ids 5 and 6, optional). Data files always name the
// columns so, even after Rename: a file is read by field id.
type Row struct {
	ID     int64   `parquet:"id,id(1)"`
	Part   string  `parquet:"part,id(2)"`
	Key    int64   `parquet:"key,id(3)"`
	Score  float64 `parquet:"score,id(4)"`
	Weight *float64
	Tags   []int64
}

// Layout is how a test table is partitioned.
type Layout struct {
	// ByPart partitions by identity(part): one data file per part value.
	ByPart bool
	// Buckets > 0 partitions by bucket[Buckets](key): one file per bucket.
	Buckets int
	// URL, if set, is where the table's directory is seen by readers
	// ("s3://bucket/events"): the locations the metadata holds are under
	// it. Empty: file:// URLs of the local paths.
	URL string
	// RowGroupRows > 0 caps the rows of a data file's row groups.
	RowGroupRows int64
	// FormatVersion is the table's Iceberg format version: 2 (0 means
	// 2) or 3, which deletion vectors need.
	FormatVersion int
	// Imported writes data files without field ids, as files a table
	// imported (Iceberg's migrate and add_files) are, and gives the table
	// a name mapping (schema.name-mapping.default) of its columns' names.
	Imported bool
	// FloatScore makes score a float (32 bits) until PromoteScore makes
	// it a double: the data files written before store float values and
	// float bounds. Not with Imported or AddColumns.
	FloatScore bool
	// Hive makes the table one that Iceberg's migrate made of a Hive
	// table: it has a sixth column, ts timestamptz (field id 9, each
	// row's EventTime), and its data files, as Imported ones, have no
	// field ids and store ts as INT96, until NativeWrites. Not with
	// FloatScore or AddColumns.
	Hive bool
	// Dated gives the table a seventh column, day date (field id 10, each
	// row's DayOf), until PromoteDay makes it a timestamp (format v3;
	// dated.go). Not with FloatScore, Hive, Imported or AddColumns.
	Dated bool
	// Nested gives the table the column user struct<uid long> (field ids
	// 11 and 12, each row's UserOf; nested.go), which equality deletes
	// can name as "user.uid". Not with FloatScore, Hive, Imported, Dated
	// or AddColumns.
	Nested bool
}

// Table is a table being written at Dir (metadata under Dir/metadata,
// data under Dir/data). Each commit writes a new metadata file.
type Table struct {
	Dir       string
	url       string
	schema    *ice.Schema
	spec      ice.PartitionSpec
	meta      iceberg.Metadata
	live      []ice.ManifestEntry // data files of the current snapshot
	dels      []ice.ManifestEntry // delete files of the current snapshot
	files     int
	groupRows int64
	where     map[int64]Position // each row's data file and position, by id
	version   int
	metaFiles int // metadata files written
	imported  bool
	hive      bool // Layout.Hive: ts is a column; INT96 in data files until native
	native    bool // NativeWrites ran
	added     bool // AddColumns ran: data files hold weight and tags
	narrow    bool // score is a float: data files store it so (Layout.FloatScore)
	defaulted bool // AddDefaulted ran
	dated     bool // Layout.Dated: day is a column
	stamped   bool // PromoteDay ran: data files store day as a timestamp
	nested    bool // Layout.Nested: user is a column
}

// New starts an empty table at dir.
func New(dir string, l Layout) (*Table, error) {
	if err := os.MkdirAll(filepath.Join(dir, "metadata"), 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	schema := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true},
		ice.NestedField{ID: 2, Name: "part", Type: ice.PrimitiveTypes.String, Required: true},
		ice.NestedField{ID: 3, Name: "key", Type: ice.PrimitiveTypes.Int64, Required: true},
		ice.NestedField{ID: 4, Name: "score", Type: ice.PrimitiveTypes.Float64, Required: true},
	)
	if l.FloatScore {
		if l.Imported {
			return nil, fmt.Errorf("FloatScore with Imported is not supported")
		}
		fields := schema.Fields()
		fields[3].Type = ice.PrimitiveTypes.Float32
		schema = ice.NewSchema(0, fields...)
	}
	if l.Hive {
		if l.FloatScore {
			return nil, fmt.Errorf("FloatScore with Hive is not supported")
		}
		schema = ice.NewSchema(0, append(schema.Fields(),
			ice.NestedField{ID: 9, Name: "ts", Type: ice.PrimitiveTypes.TimestampTz, Required: true})...)
		l.Imported = true
	}
	if err := checkDated(l); err != nil {
		return nil, err
	}
	if l.Dated {
		schema = ice.NewSchema(0, append(schema.Fields(), datedField)...)
	}
	if err := checkNested(l); err != nil {
		return nil, err
	}
	if l.Nested {
		schema = ice.NewSchema(0, append(schema.Fields(), nestedField)...)
	}
	var fields []ice.PartitionField
	if l.ByPart {
		fields = append(fields, ice.PartitionField{SourceIDs: []int{2}, FieldID: 1000, Name: "part", Transform: ice.IdentityTransform{}})
	}
	if l.Buckets > 0 {
		fields = append(fields, ice.PartitionField{SourceIDs: []int{3}, FieldID: 1001, Name: "key_bucket", Transform: ice.BucketTransform{NumBuckets: l.Buckets}})
	}
	t := &Table{Dir: dir, url: l.URL, schema: schema, spec: ice.NewPartitionSpecID(0, fields...), groupRows: l.RowGroupRows,
		where: map[int64]Position{}, version: max(l.FormatVersion, 2), narrow: l.FloatScore, hive: l.Hive, dated: l.Dated, nested: l.Nested}
	t.meta = iceberg.Metadata{FormatVersion: t.version, Location: dir, Schemas: []*ice.Schema{schema}, Specs: []ice.PartitionSpec{t.spec}}
	if l.Imported {
		t.imported = true
		t.meta.Properties = map[string]string{}
		if err := t.mapNames(); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Append writes rows as new data files (one per partition) and commits
// a snapshot holding them and every file of the previous one. It returns
// the new snapshot's id and the new metadata file's path.
func (t *Table) Append(rows []Row) (int64, string, error) {
	groups := map[string][]Row{}
	var order []string
	for _, r := range rows {
		k := t.partKey(r)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	slices.Sort(order)
	id := int64(1000 + len(t.meta.Snapshots))
	seq := int64(len(t.meta.Snapshots) + 1)
	for _, k := range order {
		df, err := t.writeData(groups[k])
		if err != nil {
			return 0, "", err
		}
		t.live = append(t.live, ice.NewManifestEntry(ice.EntryStatusADDED, &id, &seq, &seq, df))
	}
	return t.commit(id, seq, t.live, t.dels)
}

// DataFiles returns the locations of the current snapshot's data files,
// in the order they were added.
func (t *Table) DataFiles() []string {
	out := make([]string, len(t.live))
	for i, e := range t.live {
		out[i] = e.DataFile().FilePath()
	}
	return out
}

// Position is a row of a position delete file: row Pos of the data file
// at location File (as DataFiles gives it).
type Position struct {
	File string `parquet:"file_path"`
	Pos  int64  `parquet:"pos"`
}

// DeletePositions commits a snapshot that adds one position delete file
// of rows, written in the order given (the format wants them sorted by
// file and position; tests may not). seq, when > 0, is the delete file's
// data sequence number instead of the snapshot's (a delete older than
// some data files).
func (t *Table) DeletePositions(rows []Position, seq int64) (int64, string, error) {
	id := int64(1000 + len(t.meta.Snapshots))
	snapSeq := int64(len(t.meta.Snapshots) + 1)
	if seq <= 0 {
		seq = snapSeq
	}
	path := filepath.Join(t.Dir, "data", fmt.Sprintf("delete-%d.parquet", id))
	if err := parquet.WriteFile(path, rows); err != nil {
		return 0, "", err
	}
	b, err := ice.NewDataFileBuilder(t.spec, ice.EntryContentPosDeletes, t.loc(path), ice.ParquetFile,
		t.live[0].DataFile().Partition(), nil, nil, int64(len(rows)), fileSize(path))
	if err != nil {
		return 0, "", err
	}
	t.dels = append(t.dels, ice.NewManifestEntry(ice.EntryStatusADDED, &id, &seq, &snapSeq, b.Build()))
	return t.commit(id, snapSeq, t.live, t.dels)
}

// Locate returns where the row with id was written: its data file's
// location and its position there.
func (t *Table) Locate(id int64) (Position, bool) {
	p, ok := t.where[id]
	return p, ok
}

// DeleteEquality commits a snapshot that adds an equality delete file
// on one column of the schema ("id", "key" or "part"; "score" for a
// table lastmile must refuse; "user.uid" of a Layout.Nested table) with values ([]int64, []string or
// []float64), in the partition of the data files of part (the first
// one's, when the table is not partitioned by part). seq, when > 0, is
// its data sequence number instead of the snapshot's.
func (t *Table) DeleteEquality(part, col string, values any, seq int64) (int64, string, error) {
	id := int64(1000 + len(t.meta.Snapshots))
	snapSeq := int64(len(t.meta.Snapshots) + 1)
	if seq <= 0 {
		seq = snapSeq
	}
	field, ok := t.schema.FindFieldByName(col)
	if !ok {
		return 0, "", fmt.Errorf("no column %q", col)
	}
	v := reflect.ValueOf(values)
	typ, rowOf := deleteRowType(col, field.ID, v.Type().Elem())
	path := filepath.Join(t.Dir, "data", fmt.Sprintf("eq-delete-%d.parquet", id))
	f, err := os.Create(path)
	if err != nil {
		return 0, "", err
	}
	w := parquet.NewWriter(f, parquet.SchemaOf(reflect.New(typ).Interface()))
	for i := range v.Len() {
		row := rowOf(v.Index(i))
		if err := w.Write(row.Addr().Interface()); err != nil {
			return 0, "", err
		}
	}
	if err := w.Close(); err != nil {
		return 0, "", err
	}
	if err := f.Close(); err != nil {
		return 0, "", err
	}
	partition := t.live[0].DataFile().Partition()
	for _, e := range t.live {
		if p, ok := e.DataFile().Partition()[1000]; ok && p == part {
			partition = e.DataFile().Partition()
			break
		}
	}
	b, err := ice.NewDataFileBuilder(t.spec, ice.EntryContentEqDeletes, t.loc(path), ice.ParquetFile,
		partition, nil, nil, int64(v.Len()), fileSize(path))
	if err != nil {
		return 0, "", err
	}
	b.EqualityFieldIDs([]int{field.ID})
	t.dels = append(t.dels, ice.NewManifestEntry(ice.EntryStatusADDED, &id, &seq, &snapSeq, b.Build()))
	return t.commit(id, snapSeq, t.live, t.dels)
}

// loc is the location the metadata records for a local path under Dir.
func (t *Table) loc(path string) string {
	if t.url == "" {
		return "file://" + path
	}
	rel, err := filepath.Rel(t.Dir, path)
	if err != nil {
		panic("BUG: " + err.Error())
	}
	return t.url + "/" + filepath.ToSlash(rel)
}

func (t *Table) partKey(r Row) string {
	k := ""
	if t.spec.NumFields() > 0 {
		for _, f := range t.spec.Fields() {
			switch tr := f.Transform.(type) {
			case ice.IdentityTransform:
				k += "part=" + r.Part + "/"
			case ice.BucketTransform:
				k += fmt.Sprintf("bucket=%05d/", Bucket(tr.NumBuckets, r.Key))
			}
		}
	}
	return k
}

// Bucket is Iceberg's bucket[n] of an int64 key.
func Bucket(n int, key int64) int {
	return int(ice.BucketTransform{NumBuckets: n}.Transformer(ice.PrimitiveTypes.Int64)(key).Val)
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// writeData writes one Parquet data file of rows (one partition) and
// returns its DataFile, with partition values and column statistics.
func (t *Table) writeData(rows []Row) (ice.DataFile, error) {
	t.files++
	path := filepath.Join(t.Dir, "data", fmt.Sprintf("%05d.parquet", t.files))
	var opts []parquet.WriterOption
	if t.groupRows > 0 {
		opts = append(opts, parquet.MaxRowsPerRowGroup(t.groupRows))
	}
	if err := t.writeRows(path, rows, opts); err != nil {
		return nil, err
	}
	for i, r := range rows {
		t.where[r.ID] = Position{File: t.loc(path), Pos: int64(i)}
	}
	part := map[int]any{}
	for _, f := range t.spec.Fields() {
		switch tr := f.Transform.(type) {
		case ice.IdentityTransform:
			part[f.FieldID] = rows[0].Part
		case ice.BucketTransform:
			part[f.FieldID] = int32(Bucket(tr.NumBuckets, rows[0].Key))
		}
	}
	b, err := ice.NewDataFileBuilder(t.spec, ice.EntryContentData, t.loc(path), ice.ParquetFile, part, nil, nil, int64(len(rows)), fileSize(path))
	if err != nil {
		return nil, err
	}
	lo, hi := rows[0], rows[0]
	for _, r := range rows {
		lo.ID, hi.ID = min(lo.ID, r.ID), max(hi.ID, r.ID)
		lo.Part, hi.Part = min(lo.Part, r.Part), max(hi.Part, r.Part)
		lo.Key, hi.Key = min(lo.Key, r.Key), max(hi.Key, r.Key)
		lo.Score, hi.Score = min(lo.Score, r.Score), max(hi.Score, r.Score)
	}
	los, his := bounds(lo, t.narrow), bounds(hi, t.narrow)
	t.dayBounds(los, his, lo.ID, hi.ID)
	b.LowerBoundValues(los).UpperBoundValues(his)
	b.NullValueCounts(map[int]int64{1: 0, 2: 0, 3: 0, 4: 0}).NaNValueCounts(map[int]int64{4: 0})
	return b.Build(), nil
}

// bounds are r's values as a manifest's bounds, score as a float where
// narrow is set.
func bounds(r Row, narrow bool) map[int][]byte {
	enc := func(l ice.Literal) []byte {
		b, err := l.MarshalBinary()
		if err != nil {
			panic("BUG: " + err.Error())
		}
		return b
	}
	score := enc(ice.NewLiteral(r.Score))
	if narrow {
		score = enc(ice.NewLiteral(float32(r.Score)))
	}
	return map[int][]byte{
		1: enc(ice.NewLiteral(r.ID)), 2: enc(ice.NewLiteral(r.Part)),
		3: enc(ice.NewLiteral(r.Key)), 4: score,
	}
}

// commit writes a manifest of the data entries (and one of the delete
// entries, if any), a manifest list and a new metadata file.
func (t *Table) commit(id, seq int64, data, deletes []ice.ManifestEntry) (int64, string, error) {
	meta := filepath.Join(t.Dir, "metadata")
	var mfs []ice.ManifestFile
	write := func(name string, entries []ice.ManifestEntry, content ice.ManifestContent) error {
		path := filepath.Join(meta, name)
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		w, err := ice.NewManifestWriter(t.version, f, t.spec, t.schema, id, ice.WithManifestWriterContent(content))
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.SnapshotID() == id {
				err = w.Add(e)
			} else {
				err = w.Existing(e)
			}
			if err != nil {
				return err
			}
		}
		if err := w.Close(); err != nil {
			return err
		}
		mf, err := w.ToManifestFile(t.loc(path), fileSize(path), ice.WithManifestFileContent(content))
		if err != nil {
			return err
		}
		mfs = append(mfs, mf)
		return nil
	}
	if err := write(fmt.Sprintf("manifest-%d-data.avro", id), data, ice.ManifestContentData); err != nil {
		return 0, "", fmt.Errorf("write manifest: %w", err)
	}
	if len(deletes) > 0 {
		if err := write(fmt.Sprintf("manifest-%d-deletes.avro", id), deletes, ice.ManifestContentDeletes); err != nil {
			return 0, "", fmt.Errorf("write delete manifest: %w", err)
		}
	}
	list := filepath.Join(meta, fmt.Sprintf("snap-%d.avro", id))
	f, err := os.Create(list)
	if err != nil {
		return 0, "", err
	}
	var parent *int64
	if t.meta.CurrentSnapshotID != nil {
		parent = t.meta.CurrentSnapshotID
	}
	err = ice.WriteManifestList(t.version, f, id, parent, &seq, 0, mfs)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, "", fmt.Errorf("write manifest list: %w", err)
	}
	snap := iceberg.Snapshot{ID: id, ParentID: parent, Sequence: seq, TimestampMs: 1700000000000 + seq, ManifestList: t.loc(list),
		Summary: map[string]string{"operation": "append"}}
	t.meta.Snapshots = append(t.meta.Snapshots, snap)
	cur := id
	t.meta.CurrentSnapshotID = &cur
	path, err := t.writeMetadata()
	if err != nil {
		return 0, "", err
	}
	return id, path, nil
}

// writeMetadata writes t.meta as the next metadata file and returns its
// path.
func (t *Table) writeMetadata() (string, error) {
	data, err := json.MarshalIndent(&t.meta, "", "  ")
	if err != nil {
		return "", err
	}
	t.metaFiles++
	path := t.MetadataPath()
	return path, os.WriteFile(path, data, 0o644)
}

// MetadataJSON returns the current metadata file's text.
func (t *Table) MetadataJSON() ([]byte, error) { return json.Marshal(&t.meta) }

// MetadataPath returns the current metadata file's path.
func (t *Table) MetadataPath() string {
	return filepath.Join(t.Dir, "metadata", fmt.Sprintf("v%d.metadata.json", t.metaFiles))
}
