package iceberg

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	ice "github.com/apache/iceberg-go"
	"github.com/lastmile/lastmile/decode"
)

// MaxMetadataBytes bounds one metadata file, manifest list or manifest
// read whole into memory.
const MaxMetadataBytes = 256 << 20

// Metadata is what lastmile reads of a table metadata file (the Iceberg
// table spec, formats 1 to 3): its schemas, partition specs and
// snapshots. Other fields (sort orders, properties, statistics) are
// ignored.
type Metadata struct {
	FormatVersion     int                 `json:"format-version"`
	Location          string              `json:"location"`
	Schemas           []*ice.Schema       `json:"schemas"`
	Schema            *ice.Schema         `json:"schema,omitempty"` // format 1 writers may give only this
	CurrentSchemaID   int                 `json:"current-schema-id"`
	Specs             []ice.PartitionSpec `json:"partition-specs"`
	DefaultSpecID     int                 `json:"default-spec-id"`
	CurrentSnapshotID *int64              `json:"current-snapshot-id"`
	Snapshots         []Snapshot          `json:"snapshots"`
	Properties        map[string]string   `json:"properties,omitempty"`
}

// Snapshot is one snapshot of a table.
type Snapshot struct {
	ID           int64             `json:"snapshot-id"`
	ParentID     *int64            `json:"parent-snapshot-id,omitempty"`
	Sequence     int64             `json:"sequence-number"`
	TimestampMs  int64             `json:"timestamp-ms"`
	ManifestList string            `json:"manifest-list"`
	Manifests    []string          `json:"manifests,omitempty"` // format 1 without a manifest list: refused
	Summary      map[string]string `json:"summary,omitempty"`
	SchemaID     *int              `json:"schema-id,omitempty"`
}

// ParseMetadata parses a table metadata file and checks what lastmile
// relies on: a known format version, a schema, partition specs, and
// snapshots with manifest lists and distinct ids.
func ParseMetadata(data []byte) (*Metadata, error) {
	var m Metadata
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("parse table metadata: %w", err)
	}
	if m.FormatVersion < 1 || m.FormatVersion > 3 {
		return nil, fmt.Errorf("table metadata: format-version %d: lastmile reads Iceberg format versions 1 to 3", m.FormatVersion)
	}
	if len(m.Schemas) == 0 && m.Schema != nil {
		m.Schemas = []*ice.Schema{m.Schema}
		m.CurrentSchemaID = m.Schema.ID
	}
	for i, s := range m.Schemas {
		if s == nil {
			return nil, fmt.Errorf("table metadata: schemas[%d] is null", i)
		}
	}
	if m.schema(m.CurrentSchemaID) == nil {
		return nil, fmt.Errorf("table metadata: no schema with current-schema-id %d", m.CurrentSchemaID)
	}
	if len(m.Specs) == 0 {
		m.Specs = []ice.PartitionSpec{ice.NewPartitionSpecID(0)}
		m.DefaultSpecID = 0
	}
	seen := map[int64]bool{}
	for i, s := range m.Snapshots {
		if seen[s.ID] {
			return nil, fmt.Errorf("table metadata: snapshot id %d given twice", s.ID)
		}
		seen[s.ID] = true
		if s.ManifestList == "" {
			return nil, fmt.Errorf("table metadata: snapshot %d (snapshots[%d]) has no manifest-list: format 1 snapshots with inline manifests are not supported; rewrite the table's metadata with a current Iceberg writer", s.ID, i)
		}
	}
	if m.CurrentSnapshotID != nil && *m.CurrentSnapshotID != -1 && !seen[*m.CurrentSnapshotID] {
		return nil, fmt.Errorf("table metadata: current-snapshot-id %d is not among the snapshots", *m.CurrentSnapshotID)
	}
	return &m, nil
}

func (m *Metadata) schema(id int) *ice.Schema {
	for _, s := range m.Schemas {
		if s.ID == id {
			return s
		}
	}
	return nil
}

func (m *Metadata) spec(id int) *ice.PartitionSpec {
	for i := range m.Specs {
		if m.Specs[i].ID() == id {
			return &m.Specs[i]
		}
	}
	return nil
}

// ErrNoSnapshot is returned for a table without the snapshot asked for
// (or, asked for the current one, without any).
var ErrNoSnapshot = errors.New("no such snapshot")

// Snapshot returns snapshot id, or the current one when id is 0.
func (m *Metadata) Snapshot(id int64) (*Snapshot, error) {
	if id == 0 {
		if m.CurrentSnapshotID == nil || *m.CurrentSnapshotID == -1 {
			return nil, fmt.Errorf("%w: the table has no current snapshot (it is empty)", ErrNoSnapshot)
		}
		id = *m.CurrentSnapshotID
	}
	for i := range m.Snapshots {
		if m.Snapshots[i].ID == id {
			return &m.Snapshots[i], nil
		}
	}
	ids := ""
	for i, s := range m.Snapshots {
		if i == 8 {
			ids += ", ..."
			break
		}
		if i > 0 {
			ids += ", "
		}
		ids += strconv.FormatInt(s.ID, 10)
	}
	return nil, fmt.Errorf("%w: snapshot %d is not in the table (it has: %s); it may have been expired", ErrNoSnapshot, id, ids)
}

// readLocation reads a whole file at loc (a path, file:// or s3:// URL)
// through fsys.
func readLocation(fsys decode.FS, loc string) ([]byte, error) {
	name, err := localOrURL(loc)
	if err != nil {
		return nil, err
	}
	st, err := fsys.Stat(name)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	if st.Size() > MaxMetadataBytes {
		return nil, fmt.Errorf("%s has %d bytes, more than the %d lastmile reads of a metadata file", name, st.Size(), MaxMetadataBytes)
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, st.Size())
	n, err := f.ReadAt(buf, 0)
	if n == len(buf) {
		return buf, nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return nil, fmt.Errorf("read %s: %w", name, err)
}

// nameMappingKey is the table property that gives the field ids of the
// columns of data files that store none (files a table imported).
const nameMappingKey = "schema.name-mapping.default"

// nameMapping returns the table's name mapping of top-level columns: a
// name that files without field ids give a column, to its field id. It is
// nil when the table has none.
func (m *Metadata) nameMapping() (map[string]int32, error) {
	text, ok := m.Properties[nameMappingKey]
	if !ok {
		return nil, nil
	}
	var nm ice.NameMapping
	if err := json.Unmarshal([]byte(text), &nm); err != nil {
		return nil, fmt.Errorf("table property %s: %v", nameMappingKey, err)
	}
	mapped := map[string]int32{}
	if err := mapNames(mapped, "", nm, 0); err != nil {
		return nil, fmt.Errorf("table property %s: %v", nameMappingKey, err)
	}
	return mapped, nil
}

// mapNames adds to mapped the field ids of fields, by each of their
// names after prefix, and of their nested fields by the dotted paths of
// those names ("user.age"): every name a struct member has had, under
// every name its struct has had.
func mapNames(mapped map[string]int32, prefix string, fields []ice.MappedField, depth int) error {
	if depth > 16 {
		return fmt.Errorf("nested deeper than 16 levels")
	}
	for _, f := range fields {
		if f.FieldID == nil {
			continue // names without an id: such columns are not the table's
		}
		for _, name := range f.Names {
			key := prefix + name
			if prev, dup := mapped[key]; dup && prev != int32(*f.FieldID) {
				return fmt.Errorf("the name %q is mapped to field ids %d and %d", key, prev, *f.FieldID)
			}
			mapped[key] = int32(*f.FieldID)
			if len(f.Fields) > 0 && len(mapped) <= maxMappedNames {
				if err := mapNames(mapped, key+".", f.Fields, depth+1); err != nil {
					return err
				}
			}
		}
	}
	if len(mapped) > maxMappedNames {
		return fmt.Errorf("more than %d names", maxMappedNames)
	}
	return nil
}

// maxMappedNames bounds the names a name mapping gives: each name of a
// struct repeats its members' names, so a small mapping could list many.
const maxMappedNames = 1 << 16
