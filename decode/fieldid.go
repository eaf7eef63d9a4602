package decode

import (
	"fmt"
	"strings"
)

// Columns by field id: how a table format that names its columns by id
// (Iceberg) reads files written before a column was renamed.
//
// An Iceberg table names each column by a field id that never changes and
// never returns; its writers store that id with the column in every
// Parquet file's schema (SchemaElement.field_id). A rename changes the
// name in the table's schema only, so a file written before it holds the
// column under its old name. Reading by name would miss it, and a column
// dropped and added again under its old name would read the old column's
// values, which the table says are gone. So where PlanOptions.Table
// gives a file its table's schema, each projected column is read by its
// field id: the top-level column of the file with that id, whatever its
// name there. A file without field ids (one that a table imported, as
// Iceberg's migrate and add_files procedures do) takes its columns' ids
// from the table's name mapping, which lists each id's names in such
// files; without a mapping it is read by name. A projected name that the
// table does not have is refused, and projecting every column gives the
// table's names, leaving out the file's columns that the table has
// dropped.

// TableSchema is how a table names the top-level columns of its files.
type TableSchema struct {
	// IDs are the table's columns' field ids, by their names now.
	IDs map[string]int32
	// Mapped are the field ids of columns of files that store none, by
	// the names those files give them (Iceberg's
	// schema.name-mapping.default); nil without a mapping.
	Mapped map[string]int32
}

// columnID is the field id of top-level column c of a file: the one the
// file stores, else the one the name mapping gives its name.
func (t *TableSchema) columnID(c *schemaNode) (int32, bool) {
	if c.el.FieldID != 0 {
		return c.el.FieldID, true
	}
	id, ok := t.Mapped[c.el.Name]
	return id, ok
}

// fileColumnName returns the name under which the top-level column with
// field id id is stored in the file whose schema is root, for the
// projected name: that column's name, or name itself where no column of
// the file has a known id. It refuses a file whose column of that name
// has another id, and one that has no column with the id.
func (t *TableSchema) fileColumnName(root *schemaNode, name string, id int32) (string, error) {
	known := false
	var same int32 // the id of the file's column of that name, 0 for none or unknown
	for _, c := range root.children {
		cid, ok := t.columnID(c)
		known = known || ok
		if ok && cid == id {
			return c.el.Name, nil
		}
		if ok && c.el.Name == name {
			same = cid
		}
	}
	switch {
	case !known:
		return name, nil
	case same != 0:
		return "", fmt.Errorf("%w: the file's column %q is field id %d, the table's column of that name is field id %d: "+
			"it was dropped and added again after this file was written, so the file holds none of its values; "+
			"rewrite the table's data files (compaction) to read it", ErrSchemaMismatch, name, same, id)
	default:
		return "", fmt.Errorf("%w: no column with field id %d (the table's %q): it was added to the table after this file was written, "+
			"and lastmile does not read a missing column as nulls; rewrite the table's data files (compaction) to read it",
			ErrMissingColumn, id, name)
	}
}

// storedName is the name under which the file whose schema is root
// stores the projected column name: name itself without a table, else
// the column with the field id the table gives name, or the top-level
// column a dotted name starts with (a struct's member). A name that is
// not the table's is refused.
func (t *TableSchema) storedName(root *schemaNode, name string) (string, error) {
	if t == nil {
		return name, nil
	}
	if id, ok := t.IDs[name]; ok {
		return t.fileColumnName(root, name, id)
	}
	top, rest, dotted := strings.Cut(name, ".")
	if id, ok := t.IDs[top]; ok && dotted {
		s, err := t.fileColumnName(root, top, id)
		return s + "." + rest, err
	}
	return "", fmt.Errorf("%w: the table has no column %q (a column renamed or dropped since the file was written is read by the table's current names)",
		ErrMissingColumn, name)
}

// everyName lists every column of the file whose schema is root, as
// projecting every column names them (appendLeafNames): under the
// table's names where the file's columns have known ids, leaving out
// those the table has dropped, and those of unknown id that the table
// does not have by name.
func (t *TableSchema) everyName(root *schemaNode) []string {
	var byID map[int32]string
	if t != nil {
		byID = make(map[int32]string, len(t.IDs))
		for name, id := range t.IDs {
			byID[id] = name
		}
	}
	var names []string
	for _, c := range root.children {
		name := c.el.Name
		if t != nil {
			var ok bool
			if id, known := t.columnID(c); known {
				name, ok = byID[id]
			} else {
				_, ok = t.IDs[name]
			}
			if !ok {
				continue // not the table's
			}
		}
		names = appendLeafNames(names, c, name)
	}
	return names
}
