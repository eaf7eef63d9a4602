package decode

import (
	"fmt"
	"strings"

	"github.com/parquet-go/parquet-go/format"
)

// Columns by field id: how a table format that names its columns by id
// (Iceberg) reads files written before its schema changed.
//
// An Iceberg table names each column, and each member of a struct, by a
// field id that never changes and never returns; its writers store that
// id with the column in every Parquet file's schema
// (SchemaElement.field_id). A rename changes the name in the table's
// schema only, so a file written before it holds the column under its
// old name. Reading by name would miss it, and a column dropped and added
// again under its old name would read the old column's values, which the
// table says are gone. So where PlanOptions.Table gives a file its
// table's schema, each projected column is read by its field id: the
// top-level column of the file with that id, whatever its name there,
// and inside it the struct members with the ids of the table's members
// that the projected name walks (fieldmember.go). A file without field
// ids (one that a table imported, as Iceberg's migrate and add_files
// procedures do) takes its columns' ids from the table's name mapping,
// which lists each id's names in such files; without a mapping it is
// read by name. A projected name that the table does not have is
// refused, and projecting every column gives the table's names, leaving
// out the file's columns that the table has dropped.
//
// A column, or a struct member, added to the table after a file was
// written is not in that file: Iceberg reads it as null in every row of
// it. TableSchema.Stored gives each column as the table's writers store
// it now (its Parquet schema elements, with field ids), so a file without
// it resolves the column from those elements, as if the file held it,
// and marks it absent (Field.Absent, Chunk.Absent): its units read no
// bytes for it, and the decoder gives every row null (absent.go), or
// the column's initial default where TableSchema.Defaults gives one.
// Only those ids and the ones in TableSchema.Nullable may be missing so:
// a required column without a default is refused.
// Field.Absent is how the resolution went in one file; the plan's field
// is a present one wherever any file has the column, and the two need
// only agree on what the decoder produces (sameAs).

// TableSchema is how a table names the columns of its files.
type TableSchema struct {
	// IDs are the table's top-level columns' field ids, by their names
	// now.
	IDs map[string]int32
	// Mapped are the field ids of columns of files that store none, by
	// the names those files give them, a struct member's by its dotted
	// path ("user.age"; Iceberg's schema.name-mapping.default); nil
	// without a mapping.
	Mapped map[string]int32
	// Stored gives, by top-level field id, each column as the table's
	// writers store it now: its Parquet schema elements, the column's
	// own first, with its members' field ids and current names. Without
	// an entry a column's members are found by name, and a file without
	// the column is refused.
	Stored map[int32][]format.SchemaElement
	// Nullable are the field ids, of columns and of struct members, that
	// read as null in a file written before they were added.
	Nullable map[int32]bool
	// Defaults are the values that columns and struct members added
	// with an initial default read in a file written before: each in
	// Parquet's PLAIN encoding of its stored type (a BYTE_ARRAY's with
	// its 4-byte length, a BOOLEAN's in one byte).
	Defaults map[int32][]byte
	// Order is the table's top-level column names, in its order: with
	// it, projecting every column gives them so, in every file (those a
	// file lacks included), each expanded as the table stores it. Without
	// it, every column is the file's, in its order.
	Order []string
}

// columnID is the field id of top-level column c of a file: the one the
// file stores, else the one the name mapping gives its name.
func (t *TableSchema) columnID(c *schemaNode) (int32, bool) {
	return t.nodeID(c, c.el.Name)
}

// nodeID is the field id of the file's node c at dotted path (its names
// in the file): the one the file stores, else the name mapping's.
func (t *TableSchema) nodeID(c *schemaNode, path string) (int32, bool) {
	if c.el.FieldID != 0 {
		return c.el.FieldID, true
	}
	id, ok := t.Mapped[path]
	return id, ok
}

// tableColumn is the table's top-level column id as Stored gives it,
// named name, in a schema of its own; nil without an entry, or one that
// is malformed.
func (t *TableSchema) tableColumn(name string, id int32) *schemaNode {
	els := t.Stored[id]
	if len(els) == 0 {
		return nil
	}
	all := make([]format.SchemaElement, 0, 1+len(els))
	all = append(all, format.SchemaElement{Name: "schema"})
	all[0].NumChildren.Set(1)
	all = append(all, els...)
	all[1].Name = name
	root, err := buildSchema(all)
	if err != nil || len(root.children) != 1 {
		return nil
	}
	return root
}

// fileColumnName returns the name under which the top-level column with
// field id id is stored in the file whose schema is root, for the
// projected name, and the schema to find it in: root, or the column as
// the table stores it (tableColumn) where the file was written before it
// was added. A file where no column has a known id is read by name. It
// refuses a file whose column of that name has another id, and one that
// lacks a column that cannot read as nulls.
func (t *TableSchema) fileColumnName(root *schemaNode, name string, id int32) (string, *schemaNode, error) {
	c, known, same := t.childByID(root, "", id, name)
	switch {
	case c != nil:
		return c.el.Name, root, nil
	case !known && childNamed(root, name) != nil:
		return name, root, nil
	case same != 0:
		return "", nil, droppedError(name, same, id)
	}
	if src := t.tableColumn(name, id); src != nil && t.absentOK(id) {
		src.deflt = t.Defaults[id]
		return name, src, nil
	}
	if !known {
		return name, root, nil // findColumn says it is missing
	}
	return "", nil, missingError(name, id)
}

// childByID returns the child of the file's node n (at dotted path
// prefix, "" for the root) with field id id, whether any child's id is
// known, and the id of the child named name, 0 for none or unknown.
func (t *TableSchema) childByID(n *schemaNode, prefix string, id int32, name string) (found *schemaNode, known bool, same int32) {
	for _, c := range n.children {
		cid, ok := t.nodeID(c, prefix+c.el.Name)
		known = known || ok
		if ok && cid == id && found == nil {
			found = c
		}
		if ok && c.el.Name == name {
			same = cid
		}
	}
	return found, known, same
}

// absentOK reports whether field id may be missing from a file: it reads
// as null there, or as its initial default.
func (t *TableSchema) absentOK(id int32) bool { return t.Nullable[id] || t.Defaults[id] != nil }

func droppedError(name string, same, id int32) error {
	return fmt.Errorf("%w: the file's column %q is field id %d, the table's column of that name is field id %d: "+
		"it was dropped and added again after this file was written, so the file holds none of its values; "+
		"rewrite the table's data files (compaction) to read it", ErrSchemaMismatch, name, same, id)
}

func missingError(name string, id int32) error {
	return fmt.Errorf("%w: no column with field id %d (the table's %q): it was added to the table after this file was written, "+
		"and lastmile cannot fill it in there (it is required without an initial default, has a default lastmile does not read, "+
		"or has a type lastmile cannot describe); "+
		"rewrite the table's data files (compaction) to read it", ErrMissingColumn, id, name)
}

// storedName is the name under which the file whose schema is root
// stores the projected column name, and the schema to find it in (root,
// or one holding the column as the table stores it, where the file
// lacks it): name itself in root without a table, else the column with
// the field id the table gives name, or, for a dotted name, the members
// of the top-level column it starts with (memberName). A name that is
// not the table's is refused.
func (t *TableSchema) storedName(root *schemaNode, name string) (string, *schemaNode, error) {
	if t == nil {
		return name, root, nil
	}
	if id, ok := t.IDs[name]; ok {
		return t.fileColumnName(root, name, id)
	}
	top, rest, dotted := strings.Cut(name, ".")
	id, ok := t.IDs[top]
	if !ok || !dotted {
		return "", nil, fmt.Errorf("%w: the table has no column %q (a column renamed or dropped since the file was written is read by the table's current names)",
			ErrMissingColumn, name)
	}
	s, src, err := t.fileColumnName(root, top, id)
	if err != nil || src != root {
		return s + "." + rest, src, err
	}
	return t.memberName(root, s, top, id, rest)
}

// everyName lists every column of the file whose schema is root, as
// projecting every column names them (appendLeafNames). With the table's
// Order, they are the table's columns in its order (tableNames).
// Otherwise they are the file's in its order: under the table's names
// where the file's columns have known ids, leaving out those the table
// has dropped, and those of unknown id that the table does not have by
// name.
func (t *TableSchema) everyName(root *schemaNode) []string {
	if t != nil && t.Order != nil {
		return t.tableNames(root)
	}
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

// tableNames lists the table's columns in its order, each expanded as
// the table stores it where Stored says, else as the file does. A column
// the file cannot give is listed by its name, for resolveFields to
// refuse.
func (t *TableSchema) tableNames(root *schemaNode) []string {
	var names []string
	for _, name := range t.Order {
		if tc := t.tableColumn(name, t.IDs[name]); tc != nil {
			names = appendLeafNames(names, tc.children[0], name)
			continue
		}
		stored, src, err := t.storedName(root, name)
		var c *schemaNode
		if err == nil {
			c = childNamed(src, stored)
		}
		if c == nil {
			names = append(names, name)
			continue
		}
		names = appendLeafNames(names, c, name)
	}
	return names
}
