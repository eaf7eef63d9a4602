package icebergtest

import (
	"encoding/json"
	"fmt"

	ice "github.com/apache/iceberg-go"
	"github.com/parquet-go/parquet-go"
)

// A table's schema over its history: renamed, promoted and added columns,
// and the forms its data files store rows in as it changes.

// storedRow is Row as a data file written before AddColumns holds it.
type storedRow struct {
	ID    int64   `parquet:"id,id(1)"`
	Part  string  `parquet:"part,id(2)"`
	Key   int64   `parquet:"key,id(3)"`
	Score float64 `parquet:"score,id(4)"`
}

// storedRowFloat is Row as a data file of a table whose score is a float
// holds it (Layout.FloatScore).
type storedRowFloat struct {
	ID    int64   `parquet:"id,id(1)"`
	Part  string  `parquet:"part,id(2)"`
	Key   int64   `parquet:"key,id(3)"`
	Score float32 `parquet:"score,id(4)"`
}

// storedRowAdded is Row as a data file written after AddColumns holds
// it: tags is a three-level list, as Iceberg's writers store lists.
type storedRowAdded struct {
	ID     int64    `parquet:"id,id(1)"`
	Part   string   `parquet:"part,id(2)"`
	Key    int64    `parquet:"key,id(3)"`
	Score  float64  `parquet:"score,id(4)"`
	Weight *float64 `parquet:"weight,id(5),optional"`
	Tags   []int64  `parquet:"tags,id(6),optional,list"`
}

// newSchema makes fields the table's current schema, a new one.
func (t *Table) newSchema(fields []ice.NestedField) {
	t.schema = ice.NewSchema(len(t.meta.Schemas), fields...)
	t.meta.Schemas = append(t.meta.Schemas, t.schema)
	t.meta.CurrentSchemaID = t.schema.ID
}

// Rename renames column from to to in a new current schema, as ALTER
// TABLE RENAME COLUMN does: the field keeps its id, the data files keep
// the old name. It returns the new metadata file's path.
func (t *Table) Rename(from, to string) (string, error) {
	fields := t.schema.Fields()
	found := false
	for i := range fields {
		if fields[i].Name == from {
			fields[i].Name, found = to, true
		}
	}
	if !found {
		return "", fmt.Errorf("no column %q", from)
	}
	t.newSchema(fields)
	if t.imported {
		// As Iceberg does on a rename: the new name joins the old in
		// the mapping, which the data files' names still need.
		if err := t.mapNames(); err != nil {
			return "", err
		}
	}
	return t.writeMetadata()
}

// PromoteScore makes score, a float (Layout.FloatScore), a double in a
// new current schema, as ALTER TABLE ALTER COLUMN score TYPE double does:
// the data files written before keep their float values and bounds. It
// returns the new metadata file's path.
func (t *Table) PromoteScore() (string, error) {
	if !t.narrow {
		return "", fmt.Errorf("score is not a float")
	}
	fields := t.schema.Fields()
	fields[3].Type = ice.PrimitiveTypes.Float64
	t.newSchema(fields)
	t.narrow = false
	return t.writeMetadata()
}

// AddDefaulted adds the required column bonus long (field id 8) with the
// initial default 7, as a format v3 ALTER TABLE ADD COLUMN ... DEFAULT
// does: every data file written before reads 7. Data files are not
// written after it (Append refuses). It returns the new metadata file's
// path.
func (t *Table) AddDefaulted() (string, error) {
	fields := append(t.schema.Fields(), ice.NestedField{ID: 8, Name: "bonus", Type: ice.PrimitiveTypes.Int64, Required: true,
		InitialDefault: int64(7), WriteDefault: int64(7)})
	t.newSchema(fields)
	t.defaulted = true
	return t.writeMetadata()
}

// AddColumns adds the optional columns weight double (field id 5) and
// tags list<long> (6, its elements 7) in a new current schema, as ALTER
// TABLE ADD COLUMN does: the data files written before hold neither, and
// read them as nulls. It returns the new metadata file's path.
func (t *Table) AddColumns() (string, error) {
	switch {
	case t.added:
		return "", fmt.Errorf("columns already added")
	case t.hive:
		return "", fmt.Errorf("AddColumns with Hive is not supported")
	}
	fields := append(t.schema.Fields(),
		ice.NestedField{ID: 5, Name: "weight", Type: ice.PrimitiveTypes.Float64},
		ice.NestedField{ID: 6, Name: "tags", Type: &ice.ListType{ElementID: 7, Element: ice.PrimitiveTypes.Int64}})
	t.newSchema(fields)
	t.added = true
	if t.imported {
		if err := t.mapNames(); err != nil {
			return "", err
		}
	}
	return t.writeMetadata()
}

// writeRows writes rows as the table's data files then hold them: with
// or without the added columns, with or without field ids.
func (t *Table) writeRows(path string, rows []Row, opts []parquet.WriterOption) error {
	switch {
	case t.defaulted:
		return fmt.Errorf("data files after AddDefaulted are not supported")
	case t.narrow && t.added:
		return fmt.Errorf("FloatScore with AddColumns is not supported")
	case t.hive:
		return t.writeHive(path, rows, opts)
	case t.dated:
		return t.writeDated(path, rows, opts)
	case t.nested:
		return t.writeNested(path, rows, opts)
	case t.narrow:
		return parquet.WriteFile(path, convertRows(rows, func(r Row) storedRowFloat {
			return storedRowFloat{r.ID, r.Part, r.Key, float32(r.Score)}
		}), opts...)
	case t.imported && t.added:
		return parquet.WriteFile(path, convertRows(rows, func(r Row) plainRowAdded {
			return plainRowAdded{r.ID, r.Part, r.Key, r.Score, r.Weight, r.Tags}
		}), opts...)
	case t.imported:
		return parquet.WriteFile(path, convertRows(rows, func(r Row) plainRow { return plainRow{r.ID, r.Part, r.Key, r.Score} }), opts...)
	case t.added:
		return parquet.WriteFile(path, convertRows(rows, func(r Row) storedRowAdded {
			return storedRowAdded{r.ID, r.Part, r.Key, r.Score, r.Weight, r.Tags}
		}), opts...)
	default:
		return parquet.WriteFile(path, convertRows(rows, func(r Row) storedRow { return storedRow{r.ID, r.Part, r.Key, r.Score} }), opts...)
	}
}

func convertRows[T any](rows []Row, f func(Row) T) []T {
	out := make([]T, len(rows))
	for i, r := range rows {
		out[i] = f(r)
	}
	return out
}

// plainRow and plainRowAdded are storedRow and storedRowAdded as an
// imported data file has them: no field ids.
type (
	plainRow struct {
		ID    int64   `parquet:"id"`
		Part  string  `parquet:"part"`
		Key   int64   `parquet:"key"`
		Score float64 `parquet:"score"`
	}
	plainRowAdded struct {
		ID     int64    `parquet:"id"`
		Part   string   `parquet:"part"`
		Key    int64    `parquet:"key"`
		Score  float64  `parquet:"score"`
		Weight *float64 `parquet:"weight,optional"`
		Tags   []int64  `parquet:"tags,optional,list"`
	}
)

// storedNames are the columns' names in data files, by field id.
var storedNames = map[int]string{1: "id", 2: "part", 3: "key", 4: "score", 5: "weight", 6: "tags", 8: "bonus", 9: "ts"}

// mapNames sets the table's name mapping: each column's id by every
// name it has had (the data files' names are Row's).
func (t *Table) mapNames() error {
	var nm ice.NameMapping
	for _, f := range t.schema.Fields() {
		id := f.ID
		names := []string{f.Name}
		if old := storedNames[id]; old != f.Name {
			names = append(names, old)
		}
		nm = append(nm, ice.MappedField{FieldID: &id, Names: names})
	}
	data, err := json.Marshal(nm)
	if err != nil {
		return err
	}
	t.meta.Properties["schema.name-mapping.default"] = string(data)
	return nil
}
