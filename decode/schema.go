package decode

import (
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strings"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// Field is one projected column resolved against the file schema.
//
// Level semantics: a flat field's value is present when its definition
// level equals MaxDef. A list field's row is null when the level is below
// RowDef, an empty list at RowDef, and has an element slot above RowDef;
// the element is a value at MaxDef and a null element (decoded as zero)
// between the two.
type Field struct {
	Name     string       `json:"name"`     // top-level column name
	Kind     column.Kind  `json:"kind"`     // Fixed, List or Bytes
	DType    column.DType `json:"dtype"`    // element type
	Nullable bool         `json:"nullable"` // rows may be null
	Path     []string     `json:"path"`     // parquet path of the leaf column
	Leaf     int          `json:"leaf"`     // leaf column index in the first file's schema
	Physical int32        `json:"physical"` // parquet physical type (format.Type)
	TypeLen  int32        `json:"type_len,omitempty"`
	Decimal  bool         `json:"decimal,omitempty"`  // DECIMAL, decoded to float64 (decimal.go)
	Scale    int32        `json:"scale,omitempty"`    // a decimal's scale
	Unsigned bool         `json:"unsigned,omitempty"` // UINT_32 or UINT_64, as int64 (convert.go)
	Hash     uint64       `json:"hash,omitempty"`     // > 0: strings read as ids, XXH64 mod Hash (hashed.go)
	MaxDef   int16        `json:"max_def"`
	MaxRep   int16        `json:"max_rep"`
	RowDef   int16        `json:"row_def"` // lists: definition level of a present, empty list
	// StoredAs is the column's name in the file (a dotted path inside
	// structs), where it differs from Name: found by its top-level
	// column's field id after a rename (fieldid.go). Path is the file's.
	StoredAs string `json:"stored_as,omitempty"`
	// Absent marks a column of an Iceberg table that no planned file
	// has (it was added after they were written): every row is null.
	// Path and the levels are as the table's writers store it; Leaf is
	// -1 (fieldid.go).
	Absent bool `json:"absent,omitempty"`
	// StoredPhysical and StoredTypeLen are the file's type where the
	// table has promoted the column since the file was written (int to
	// long, float to double, a decimal's precision); Physical and
	// TypeLen are then the table's (promote.go).
	StoredPhysical int32 `json:"stored_physical,omitempty"`
	StoredTypeLen  int32 `json:"stored_type_len,omitempty"`
	// Default, for an Absent field, is the value every row reads in
	// place of null (an Iceberg column's initial default), as the
	// column decodes: a Fixed value's bytes, a Bytes value's (absent.go).
	Default []byte `json:"default"` // not omitted when empty: "" is a default, nil none
	// TimeUnit, for a timestamp or a date, is the nanoseconds one of its
	// values counts: 1, 1,000 or 1,000,000 for an INT64 TIMESTAMP of
	// NANOS, MICROS or MILLIS, 86,400·10^9 for an INT32 DATE; 0 for any
	// other column. An INT96 column decodes
	// to nanoseconds (int96.go), except in a file whose table reads the
	// column as its own timestamp: the file's field then takes the
	// table's type and unit (promote.go).
	TimeUnit int64 `json:"time_unit,omitempty"`

	widened bool // a decoder's view of a promoted INT32 or FLOAT chunk (promotedView)
	plain   bool // the leaf is a plain number (plainNumber): set by resolveField, for promote
}

// samePath reports whether f and g lie at the same place in their files'
// schemas: where either was found by field id under another name (a
// rename of the column or of a struct member around it), at the same
// depth, the ids having matched the rest.
func samePath(f, g *Field) bool {
	if f.StoredAs == "" && g.StoredAs == "" {
		return slices.Equal(f.Path, g.Path)
	}
	return len(f.Path) == len(g.Path) && len(f.Path) > 0
}

func (f *Field) defWidth() uint { return uint(bits.Len16(uint16(f.MaxDef))) }
func (f *Field) repWidth() uint { return uint(bits.Len16(uint16(f.MaxRep))) }

// sameAs reports the first attribute in which g differs from f, or "".
// The leaf index may differ: units address chunks by their own index.
func (f *Field) sameAs(g *Field) string {
	if f.Absent || g.Absent {
		return f.sameValues(g)
	}
	switch {
	case f.Kind != g.Kind:
		return fmt.Sprintf("kind %v vs %v", f.Kind, g.Kind)
	case f.DType != g.DType || f.Physical != g.Physical || f.TypeLen != g.TypeLen:
		return fmt.Sprintf("type %v (parquet %v) vs %v (parquet %v)", f.DType, format.Type(f.Physical), g.DType, format.Type(g.Physical))
	case f.Hash != g.Hash:
		return fmt.Sprintf("hashed mod %d vs %d", f.Hash, g.Hash)
	case f.Decimal != g.Decimal || f.Scale != g.Scale || f.Unsigned != g.Unsigned:
		return fmt.Sprintf("decimal %v scale %d vs decimal %v scale %d", f.Decimal, f.Scale, g.Decimal, g.Scale)
	case f.TimeUnit != g.TimeUnit && f.TimeUnit != 0 && g.TimeUnit != 0:
		// A column some writers annotate as a timestamp and others leave
		// a plain INT64 plans together, as the same numbers (Plan.add
		// keeps the unit); two units never do.
		return fmt.Sprintf("timestamps of %s vs %s", unitName(f.TimeUnit), unitName(g.TimeUnit))
	case widenedInt(f) && g.TimeUnit > 0 || widenedInt(g) && f.TimeUnit > 0:
		// An int a table widened to a long plans with a plain INT64, but
		// not with timestamps: the decoder reads a widened INT32 of a
		// field with a time unit as a date's days (promote.go).
		return fmt.Sprintf("an int widened to a long vs timestamps of %s", unitName(max(f.TimeUnit, g.TimeUnit)))
	case f.Nullable != g.Nullable:
		return fmt.Sprintf("nullable %v vs %v", f.Nullable, g.Nullable)
	case f.MaxDef != g.MaxDef || f.MaxRep != g.MaxRep || f.RowDef != g.RowDef || !samePath(f, g):
		return fmt.Sprintf("layout %s (def %d rep %d) vs %s (def %d rep %d)",
			strings.Join(f.Path, "."), f.MaxDef, f.MaxRep, strings.Join(g.Path, "."), g.MaxDef, g.MaxRep)
	}
	return ""
}

// sameValues is sameAs for a column that one file lacks (Absent): the
// decoder gives its rows nulls of the field's kind and type, so only
// what a column looks like decoded must agree, not how files store it.
func (f *Field) sameValues(g *Field) string {
	switch {
	case f.Kind != g.Kind:
		return fmt.Sprintf("kind %v vs %v", f.Kind, g.Kind)
	case f.DType != g.DType:
		return fmt.Sprintf("type %v vs %v", f.DType, g.DType)
	case f.Hash != g.Hash:
		return fmt.Sprintf("hashed mod %d vs %d", f.Hash, g.Hash)
	case f.TimeUnit != g.TimeUnit && f.TimeUnit != 0 && g.TimeUnit != 0:
		return fmt.Sprintf("timestamps of %s vs %s", unitName(f.TimeUnit), unitName(g.TimeUnit))
	case f.Nullable != g.Nullable:
		return fmt.Sprintf("nullable %v vs %v (a column that some files lack must be optional)", f.Nullable, g.Nullable)
	}
	return ""
}

// schemaNode is a node of the schema tree rebuilt from the flattened
// SchemaElement list.
type schemaNode struct {
	el       *format.SchemaElement
	children []*schemaNode
	leaf     int // leaf index, -1 for groups
	// deflt, on the root of a schema made for a column a file lacks
	// (fieldid.go), is the value its rows read there, as
	// TableSchema.Defaults stores it; nil for nulls.
	deflt []byte
}

func buildSchema(els []format.SchemaElement) (*schemaNode, error) {
	if len(els) == 0 {
		return nil, fmt.Errorf("empty schema")
	}
	pos, leaf := 0, 0
	var build func(depth int) (*schemaNode, error)
	build = func(depth int) (*schemaNode, error) {
		if pos >= len(els) || depth > 64 {
			return nil, fmt.Errorf("malformed schema")
		}
		n := &schemaNode{el: &els[pos], leaf: -1}
		pos++
		nc, isGroup := n.el.NumChildren.Get()
		if !isGroup || (nc == 0 && n.el.Type.Valid) {
			n.leaf = leaf
			leaf++
			return n, nil
		}
		if nc < 0 || int(nc) > len(els)-pos {
			return nil, fmt.Errorf("malformed schema: %d children", nc)
		}
		for range nc {
			c, err := build(depth + 1)
			if err != nil {
				return nil, err
			}
			n.children = append(n.children, c)
		}
		return n, nil
	}
	root, err := build(0)
	if err != nil {
		return nil, err
	}
	if pos != len(els) {
		return nil, fmt.Errorf("malformed schema: %d trailing elements", len(els)-pos)
	}
	return root, nil
}

func repetition(el *format.SchemaElement) format.FieldRepetitionType {
	r, _ := el.RepetitionType.Get()
	return r
}

func isListGroup(el *format.SchemaElement) bool {
	if _, ok := el.LogicalType.Value.(*format.ListType); ok {
		return true
	}
	ct, ok := el.ConvertedType.Get()
	return ok && ct == deprecated.List
}

// resolveFields resolves the projected names (every top-level column
// when names is empty, a struct's leaves named by their dotted paths)
// against the schema; hashed names the string columns read as ids. Every
// column (names empty) means every column the decoder can read: the
// others are returned as unreadable, each with why. A table's schema
// (nil for none) finds columns by field id (fieldid.go).
func resolveFields(root *schemaNode, names []string, hashed map[string]uint64, table *TableSchema, cache *tableFields) ([]Field, []Unreadable, error) {
	every := len(names) == 0
	if every {
		names = table.everyName(root)
	}
	fields := make([]Field, 0, len(names))
	var unreadable []Unreadable
	for _, name := range names {
		stored, src, err := table.storedName(root, name)
		if err != nil {
			return nil, nil, fmt.Errorf("column %q: %w", name, err)
		}
		node, st, err := findColumn(src, stored)
		if err != nil {
			return nil, nil, fmt.Errorf("column %q: %w", name, err)
		}
		m, isHashed := hashed[name]
		if isHashed && m == 0 {
			return nil, nil, fmt.Errorf("column %q: hashed with a modulus of 0; want at least 1", name)
		}
		f, err := resolveField(node, st, m)
		if err != nil && every && !isHashed && errors.Is(err, ErrUnsupported) {
			unreadable = append(unreadable, Unreadable{Name: name, Why: strings.TrimPrefix(err.Error(), ErrUnsupported.Error()+": ")})
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("column %q: %w", name, err)
		}
		f.Name = name
		if stored != name {
			f.StoredAs = stored
		}
		if src != root {
			f.Absent, f.Leaf = true, -1
			if f.Default, err = defaultValue(&f, src.deflt); err != nil {
				return nil, nil, fmt.Errorf("column %q: its initial default: %w", name, err)
			}
		} else if tf, ok := cache.get(table, name, m); ok {
			f = promote(f, tf)
		}
		fields = append(fields, f)
	}
	if every {
		for _, name := range slices.Sorted(maps.Keys(hashed)) {
			if !slices.Contains(names, name) {
				return nil, nil, fmt.Errorf("column %q (hashed): %w", name, ErrMissingColumn)
			}
		}
	}
	return fields, unreadable, nil
}

// Unreadable is a column that projecting every column leaves out because
// the decoder cannot read it (a map, a list of structs or of lists, a
// list of strings not read as ids), with why. Naming it is an error.
type Unreadable struct {
	Name string `json:"name"`
	Why  string `json:"why"`
}

// structPath is where a column lies inside structs: the groups' names,
// the definition levels their optional ones add, and whether any is
// optional (every row of the column may then be null).
type structPath struct {
	path     []string
	def      int16
	nullable bool
	// member, when not "", is the field of a list's elements or a map's
	// key or value that the name ends with (nested.go).
	member string
}

// isStruct reports whether n is a plain group: not a LIST or MAP, not
// repeated.
func isStruct(n *schemaNode) bool {
	if n.leaf >= 0 || isListGroup(n.el) || isMapGroup(n.el) || repetition(n.el) == format.Repeated {
		return false
	}
	return true
}

func isMapGroup(el *format.SchemaElement) bool {
	if _, ok := el.LogicalType.Value.(*format.MapType); ok {
		return true
	}
	ct, ok := el.ConvertedType.Get()
	return ok && (ct == deprecated.Map || ct == deprecated.MapKeyValue)
}

// appendLeafNames appends name, or, for a struct, the dotted names of
// its columns: what projecting every column means.
func appendLeafNames(names []string, n *schemaNode, name string) []string {
	if ms := members(n); len(ms) > 0 {
		for _, m := range ms {
			names = append(names, name+"."+m.el.Name)
		}
		return names
	}
	if !isStruct(n) {
		return append(names, name)
	}
	for _, c := range n.children {
		names = appendLeafNames(names, c, name+"."+c.el.Name)
	}
	return names
}

// findColumn finds the node a projected name stands for: a top-level
// column of that exact name, or else a column inside structs named by
// its dotted path ("user.age").
func findColumn(root *schemaNode, name string) (*schemaNode, structPath, error) {
	if c := childNamed(root, name); c != nil {
		return c, structPath{}, nil
	}
	parts := strings.Split(name, ".")
	var st structPath
	n := root
	for i, part := range parts {
		c := childNamed(n, part)
		if c == nil {
			return nil, st, ErrMissingColumn
		}
		if i == len(parts)-1 {
			return c, st, nil
		}
		if i == len(parts)-2 && (isListGroup(c.el) || isMapGroup(c.el)) {
			st.member = parts[i+1]
			return c, st, nil
		}
		if !isStruct(c) {
			return nil, st, fmt.Errorf("%w: %q is not a struct (only plain groups can be walked into)", ErrUnsupported, strings.Join(parts[:i+1], "."))
		}
		st.path = append(st.path, part)
		if repetition(c.el) == format.Optional {
			st.def++
			st.nullable = true
		}
		n = c
	}
	return nil, st, ErrMissingColumn
}

func childNamed(n *schemaNode, name string) *schemaNode {
	for _, c := range n.children {
		if c.el.Name == name {
			return c
		}
	}
	return nil
}

// resolveField resolves the column at top, which lies inside the structs
// st names.
func resolveField(top *schemaNode, st structPath, hash uint64) (Field, error) {
	f := Field{Name: top.el.Name}
	var leaf *schemaNode
	var path []string
	switch {
	case top.leaf >= 0:
		leaf, path = top, []string{top.el.Name}
		switch repetition(top.el) {
		case format.Optional:
			f.Nullable, f.MaxDef = true, 1
		case format.Repeated: // legacy bare repeated primitive: a list
			f.Kind, f.MaxDef, f.MaxRep, f.RowDef = column.List, 1, 1, 0
		}
	case isListGroup(top.el) || isMapGroup(top.el) && st.member != "":
		var err error
		if leaf, path, err = listLeaf(&f, top, st.member); err != nil {
			return f, err
		}
	case isStruct(top) && len(top.children) > 0:
		return f, fmt.Errorf("%w: a struct; project its fields by their dotted names, such as %s.%s",
			ErrUnsupported, top.el.Name, top.children[0].el.Name)
	case isMapGroup(top.el):
		return f, fmt.Errorf("%w: a map; project its keys and values as two lists, %s.key and %s.value", ErrUnsupported, top.el.Name, top.el.Name)
	default:
		return f, fmt.Errorf("%w: nested group (only primitives, list<primitive> and fields of structs are supported)", ErrUnsupported)
	}
	// Inside structs: their optional levels come first.
	f.Path, f.Leaf = append(slices.Clone(st.path), path...), leaf.leaf
	f.MaxDef += st.def
	if f.Kind == column.List {
		f.RowDef += st.def
	}
	f.Nullable = f.Nullable || st.nullable
	pt, _ := leaf.el.Type.Get()
	f.Physical = int32(pt)
	if pt == format.FixedLenByteArray {
		// Elsewhere a type_length is at most a bit width that some
		// writers set and others leave out: no part of the type.
		f.TypeLen, _ = leaf.el.TypeLength.Get()
	}
	dt, err := leafDType(leaf.el)
	if err != nil && hash > 0 && pt == format.FixedLenByteArray && f.TypeLen > 0 {
		dt, err = column.Uint8, nil // fixed-size binary (UUIDs, digests), hashed as strings are
	}
	if err != nil {
		return f, err
	}
	f.DType = dt
	f.Scale, f.Decimal = decimalScale(leaf.el)
	f.Unsigned = isUnsigned(leaf.el, 32) || isUnsigned(leaf.el, 64)
	f.plain = plainNumber(leaf.el)
	if pt == format.Int64 || pt == format.Int32 {
		f.TimeUnit = timestampUnit(leaf.el)
	}
	switch {
	case dt == column.Uint8 && hash > 0: // strings as ids (hashed.go)
		f.Hash, f.DType = hash, column.Int64
		if f.Kind != column.List {
			f.Kind = column.Fixed
		}
	case dt == column.Uint8 && f.Kind == column.List:
		name := strings.Join(append(slices.Clone(st.path), top.el.Name), ".")
		if st.member != "" {
			name += "." + st.member
		}
		return f, fmt.Errorf("%w: a list of strings, which a batch cannot hold; read it as ids with hashed: {%s: N} in the job spec",
			ErrUnsupported, name)
	case dt == column.Uint8: // BYTE_ARRAY
		f.Kind = column.Bytes
	case hash > 0:
		return f, fmt.Errorf("%w: hashed reads strings, fixed-size binary and lists of them as ids, and this column is %v", ErrUnsupported, dt)
	}
	return f, nil
}

// leafDType maps a leaf's physical and logical type to a column dtype.
func leafDType(el *format.SchemaElement) (column.DType, error) {
	pt, _ := el.Type.Get()
	if isUnsigned(el, 32) || isUnsigned(el, 64) {
		return column.Int64, nil // widened, or checked to fit (convert.go: Field.Unsigned)
	}
	if scale, ok := decimalScale(el); ok {
		n, _ := el.TypeLength.Get()
		return decimalDType(pt, n, scale)
	}
	switch pt {
	case format.Boolean:
		return column.Bool, nil
	case format.Int32:
		return column.Int32, nil
	case format.Int64:
		return column.Int64, nil
	case format.Float:
		return column.Float32, nil
	case format.Double:
		return column.Float64, nil
	case format.Int96: // a timestamp: int64 nanoseconds (int96.go)
		return column.Int64, nil
	case format.ByteArray:
		return column.Uint8, nil
	case format.FixedLenByteArray:
		if _, ok := el.LogicalType.Value.(*format.Float16Type); ok {
			if n, _ := el.TypeLength.Get(); n == 2 {
				return column.Float16, nil
			}
		}
	}
	return 0, fmt.Errorf("%w: parquet type %v", ErrUnsupported, pt)
}

// isUnsigned reports whether el is an unsigned integer of the given
// width (logical Integer or converted UINT_32/UINT_64).
// plainNumber reports whether el is a number with no meaning beyond its
// value: no annotation, or a signed integer one. A date or a timestamp
// is not (promote.go must not widen days into microseconds).
func plainNumber(el *format.SchemaElement) bool {
	switch lt := el.LogicalType.Value.(type) {
	case nil:
	case *format.IntType:
		if !lt.IsSigned {
			return false
		}
	default:
		return false
	}
	ct, ok := el.ConvertedType.Get()
	return !ok || ct == deprecated.Int8 || ct == deprecated.Int16 || ct == deprecated.Int32 || ct == deprecated.Int64
}

func isUnsigned(el *format.SchemaElement, bits int8) bool {
	if it, ok := el.LogicalType.Value.(*format.IntType); ok {
		return !it.IsSigned && it.BitWidth == bits
	}
	ct, ok := el.ConvertedType.Get()
	return ok && (bits == 32 && ct == deprecated.Uint32 || bits == 64 && ct == deprecated.Uint64)
}
