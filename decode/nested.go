package decode

import (
	"fmt"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/format"
)

// Lists and maps. A LIST group holds one repeated group, whose rows are
// the list's elements; a MAP group holds one repeated group of key and
// value. Either way every leaf below the repeated group has one
// repetition level, and reads as a list of its values, one list a row:
//
//   - list<primitive> is the list of its elements, by the list's name;
//   - a list of structs gives one list per field of the element, named
//     LIST.FIELD (hist.item_id, hist.ts): the lists of a row line up,
//     element by element;
//   - a map gives two lists, MAP.key and MAP.value (the repeated
//     group's children, whatever it names its group), lined up pair by
//     pair: the ids and weights of an id-score feature.
//
// A member that is itself a group or repeated (lists of lists) is not
// read. Definition levels: an optional list or map adds one (a present
// but empty list sits at RowDef), the repeated group one, and an
// optional element group or field one each; an element whose field is
// null at any of these reads as 0, as any null element does.

// members returns the names of the fields a list of structs or a map n
// reads as (LIST.FIELD, MAP.key): none for a list of primitives or a
// group of another shape.
func members(n *schemaNode) []*schemaNode {
	if (!isListGroup(n.el) && !isMapGroup(n.el)) || len(n.children) != 1 {
		return nil
	}
	rep := n.children[0]
	if rep.leaf >= 0 || repetition(rep.el) != format.Repeated {
		return nil
	}
	if len(rep.children) == 1 && rep.children[0].leaf < 0 {
		if !isStruct(rep.children[0]) {
			return nil // a list of lists or of maps
		}
		return rep.children[0].children // LIST → list → element {fields}
	}
	if len(rep.children) == 1 && isListGroup(n.el) {
		return nil // a list of primitives
	}
	return rep.children // a map's key and value, or a 2-level list of structs
}

// listLeaf resolves the list column that top, a LIST or MAP group, gives
// (its member field, when member is not ""), setting f's kind and levels;
// it returns the leaf and the path from top down to it.
func listLeaf(f *Field, top *schemaNode, member string) (*schemaNode, []string, error) {
	var def int16
	switch repetition(top.el) {
	case format.Optional:
		f.Nullable, def = true, 1
	case format.Repeated:
		return nil, nil, fmt.Errorf("%w: a repeated LIST or MAP group", ErrUnsupported)
	}
	f.RowDef = def
	if len(top.children) != 1 || repetition(top.children[0].el) != format.Repeated {
		return nil, nil, fmt.Errorf("%w: a LIST or MAP without one repeated child", ErrUnsupported)
	}
	rep := top.children[0]
	def++
	path := []string{top.el.Name, rep.el.Name}
	n := rep
	ms := members(top)
	switch {
	case member == "" && len(ms) > 0:
		return nil, nil, fmt.Errorf("%w: a list of structs; project its fields as %s.FIELD (%s)", ErrUnsupported, top.el.Name, memberList(ms))
	case member == "" && n.leaf < 0:
		if len(n.children) != 1 || n.children[0].leaf < 0 {
			return nil, nil, fmt.Errorf("%w: a list of lists or of maps", ErrUnsupported)
		}
		n = n.children[0]
	case member != "" && len(ms) == 0:
		return nil, nil, fmt.Errorf("%w: %q is a list of values, without fields to name", ErrUnsupported, top.el.Name)
	case member != "":
		c := childNamed(n, member)
		if c == nil && len(n.children) == 1 && n.children[0].leaf < 0 {
			elem := n.children[0] // LIST → list → element group
			if repetition(elem.el) == format.Optional {
				def++
			}
			path = append(path, elem.el.Name)
			c = childNamed(elem, member)
		}
		if c == nil {
			return nil, nil, ErrMissingColumn
		}
		n = c
	}
	if n != rep {
		path = append(path, n.el.Name)
		switch repetition(n.el) {
		case format.Optional:
			def++
		case format.Repeated:
			return nil, nil, fmt.Errorf("%w: nested lists", ErrUnsupported)
		}
	}
	if n.leaf < 0 {
		return nil, nil, fmt.Errorf("%w: a group inside a list or map (lastmile reads the primitive fields of a list's elements)", ErrUnsupported)
	}
	f.Kind, f.MaxDef, f.MaxRep = column.List, def, 1
	return n, path, nil
}

// memberList renders member fields, for errors.
func memberList(ms []*schemaNode) string {
	s := ""
	for i, m := range ms {
		if i > 0 {
			s += ", "
		}
		s += m.el.Name
	}
	return s
}
