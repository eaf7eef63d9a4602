package decode

import (
	"fmt"
	"strings"

	"github.com/parquet-go/parquet-go/format"
)

// Struct members by field id. A dotted name ("user.age") walks the
// members of a top-level struct column. Where the table gives the
// column's shape (TableSchema.Stored), each step takes the file's member
// with the field id of the table's member of that name, as
// fileColumnName does for top-level columns: a member renamed since the
// file was written is found under its old name, one dropped and added
// again is refused, and one added since reads as nulls where the table
// says it may (absentMember). The walk stops at the first node that is
// not a plain struct in the table or in the file. At a list of structs
// whose field the name's last part is (LIST.FIELD), the field is found
// by id too (listMember); anywhere else (a map's keys or values) the
// rest of the name is taken as it is, as findColumn takes it.

// memberName returns the name under which the file whose schema is root
// stores the member rest (dotted, the table's names) of its top-level
// column stored (the table's top, field id id), and the schema to find
// it in: root, or absentMember's where the file lacks a member.
func (t *TableSchema) memberName(root *schemaNode, stored, top string, id int32, rest string) (string, *schemaNode, error) {
	tn, fn := t.tableColumn(top, id), childNamed(root, stored)
	if tn == nil || fn == nil {
		return stored + "." + rest, root, nil
	}
	tn = tn.children[0]
	chain := []*schemaNode{fn}
	path, tpath := stored, top
	parts := strings.Split(rest, ".")
	for i, p := range parts {
		remainder := path + "." + strings.Join(parts[i:], ".")
		if !isStruct(tn) || !isStruct(fn) {
			if i == len(parts)-1 && isListGroup(tn.el) && isListGroup(fn.el) {
				name, err := t.listMember(tn, fn, path, tpath, p)
				return name, root, err
			}
			return remainder, root, nil
		}
		tc := childNamed(tn, p)
		tpath += "." + p
		if tc == nil {
			return "", nil, fmt.Errorf("%w: the table has no column %q", ErrMissingColumn, tpath)
		}
		mid := tc.el.FieldID
		c, known, same := t.childByID(fn, path+".", mid, p)
		switch {
		case c != nil && mid != 0:
		case !known || mid == 0:
			if c = childNamed(fn, p); c == nil {
				return remainder, root, nil // findColumn says it is missing
			}
		case same != 0:
			return "", nil, droppedError(tpath, same, mid)
		case t.absentOK(mid):
			if t.Defaults[mid] != nil && optionalIn(chain) {
				// The member reads its default where its struct is
				// present and null where it is null, and an absent
				// chunk reads no levels to tell the two apart.
				return "", nil, fmt.Errorf("%w: column %q was added with an initial default inside a struct that may be null, "+
					"which lastmile cannot yet read from files written before; rewrite those data files", ErrUnsupported, tpath)
			}
			src, err := absentMember(chain, tc)
			if src != nil {
				src.deflt = t.Defaults[mid]
			}
			return remainder, src, err
		default:
			return "", nil, missingError(tpath, mid)
		}
		path += "." + c.el.Name
		tn, fn = tc, c
		chain = append(chain, c)
	}
	return path, root, nil
}

// listMember returns the name (LIST.FIELD) under which the file's list
// of structs fn, at path, stores the field name of the elements of the
// table's list tn (at tpath): the file's field with the table's field's
// id, as for a struct's members; by name where the file gives no ids. A
// field the file lacks is refused: an absent field of a list's elements
// would need the list's levels, which lastmile does not read for it.
func (t *TableSchema) listMember(tn, fn *schemaNode, path, tpath, name string) (string, error) {
	te, fe := elementOf(tn), elementOf(fn)
	if te == nil || fe == nil {
		return path + "." + name, nil // not lists of structs: listLeaf says what they are
	}
	tc, tname := childNamed(te, name), tpath+"."+name
	switch {
	case tc == nil:
		return "", fmt.Errorf("%w: the table has no column %q", ErrMissingColumn, tname)
	case tc.el.FieldID == 0:
		return path + "." + name, nil
	}
	id := tc.el.FieldID
	c, known, same := t.childByID(fe, path+"."+fe.el.Name+".", id, name)
	switch {
	case c != nil:
		return path + "." + c.el.Name, nil
	case !known:
		return path + "." + name, nil
	case same != 0:
		return "", droppedError(tname, same, id)
	}
	return "", fmt.Errorf("%w: no field with field id %d (the table's %q) in the elements of the file's list %q: "+
		"it was added to the table after this file was written, and lastmile cannot fill in a field of a list's elements; "+
		"rewrite the table's data files (compaction) to read it", ErrMissingColumn, id, tname, path)
}

// elementOf is the element group of a list of structs n (LIST → list →
// element, or a two-level list's repeated group of several fields), nil
// for any other node.
func elementOf(n *schemaNode) *schemaNode {
	if !isListGroup(n.el) || len(n.children) != 1 || n.children[0].leaf >= 0 {
		return nil
	}
	rep := n.children[0]
	switch {
	case len(rep.children) == 1 && rep.children[0].leaf < 0 && isStruct(rep.children[0]):
		return rep.children[0]
	case len(rep.children) > 1:
		return rep
	}
	return nil
}

// optionalIn reports whether any of the file's structs in chain may be
// null.
func optionalIn(chain []*schemaNode) bool {
	for _, c := range chain {
		if repetition(c.el) == format.Optional {
			return true
		}
	}
	return false
}

// absentMember is a schema of the file's structs in chain, outermost
// first, each holding only the next, the innermost holding the table's
// member m as the table stores it: a member the file lacks, resolved
// inside the levels of the file's structs around it.
func absentMember(chain []*schemaNode, m *schemaNode) (*schemaNode, error) {
	els := []format.SchemaElement{{Name: "schema"}}
	els[0].NumChildren.Set(1)
	for _, n := range chain {
		el := *n.el
		el.NumChildren.Set(1)
		els = append(els, el)
	}
	els = appendSubtree(els, m)
	root, err := buildSchema(els)
	if err != nil {
		return nil, fmt.Errorf("%w: the table's member %q: %v", ErrSchemaMismatch, m.el.Name, err)
	}
	return root, nil
}

// appendSubtree appends n's schema elements, and its children's, depth
// first, as a footer lists them.
func appendSubtree(els []format.SchemaElement, n *schemaNode) []format.SchemaElement {
	els = append(els, *n.el)
	for _, c := range n.children {
		els = appendSubtree(els, c)
	}
	return els
}
