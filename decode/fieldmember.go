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
// not a plain struct in the table or in the file (a list's elements, a
// map's keys or values): the rest of the name is taken as it is, as
// findColumn takes it.

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
