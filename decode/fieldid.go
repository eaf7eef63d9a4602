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
// values, which the table says are gone. So where PlanOptions.FieldIDs
// gives a projected column's id, a file that stores field ids is read by
// id: the top-level column with that id, whatever its name there. A file
// without field ids (plain Parquet, or an Iceberg table that imported
// files with a name mapping) is read by name, as without FieldIDs. A
// projected name that the table does not have is refused, and
// projecting every column gives the table's names, leaving out the
// file's columns that the table has dropped.

// fileColumnName returns the name under which the top-level column with
// field id id is stored in the file whose schema is root, for the
// projected name: that column's name, or name itself where the file
// stores no field ids. It refuses a file whose column of that name has
// another id, and one that has no column with the id.
func fileColumnName(root *schemaNode, name string, id int32) (string, error) {
	stored, same := false, (*schemaNode)(nil)
	for _, c := range root.children {
		fid, ok := c.el.FieldID, c.el.FieldID != 0
		stored = stored || ok
		if ok && fid == id {
			return c.el.Name, nil
		}
		if c.el.Name == name {
			same = c
		}
	}
	switch {
	case !stored:
		return name, nil
	case same != nil:
		return "", fmt.Errorf("%w: the file's column %q is field id %d, the table's column of that name is field id %d: "+
			"it was dropped and added again after this file was written, so the file holds none of its values; "+
			"rewrite the table's data files (compaction) to read it", ErrSchemaMismatch, name, same.el.FieldID, id)
	default:
		return "", fmt.Errorf("%w: no column with field id %d (the table's %q): it was added to the table after this file was written, "+
			"and lastmile does not read a missing column as nulls; rewrite the table's data files (compaction) to read it",
			ErrMissingColumn, id, name)
	}
}

// storedName is the name under which the file whose schema is root
// stores the projected column name: name itself without ids (a file of
// no table), else the column with the field id that ids gives name, or
// the top-level column a dotted name starts with (a struct's member). A
// name that is not the table's is refused.
func storedName(root *schemaNode, name string, ids map[string]int32) (string, error) {
	if ids == nil {
		return name, nil
	}
	if id, ok := ids[name]; ok {
		return fileColumnName(root, name, id)
	}
	top, rest, dotted := strings.Cut(name, ".")
	if id, ok := ids[top]; ok && dotted {
		s, err := fileColumnName(root, top, id)
		return s + "." + rest, err
	}
	return "", fmt.Errorf("%w: the table has no column %q (a column renamed or dropped since the file was written is read by the table's current names)",
		ErrMissingColumn, name)
}

// everyName lists every column of the file whose schema is root, as
// projecting every column names them (appendLeafNames): under the
// table's names where ids gives the file's field ids one, leaving out the
// columns of the file that the table has dropped.
func everyName(root *schemaNode, ids map[string]int32) []string {
	byID := make(map[int32]string, len(ids))
	for name, id := range ids {
		byID[id] = name
	}
	var names []string
	for _, c := range root.children {
		name := c.el.Name
		switch id := c.el.FieldID; {
		case len(ids) == 0:
		case id != 0:
			var ok bool
			if name, ok = byID[id]; !ok {
				continue // dropped from the table
			}
		default:
			if _, ok := ids[name]; !ok {
				continue // a file without ids: not the table's by name either
			}
		}
		names = appendLeafNames(names, c, name)
	}
	return names
}
