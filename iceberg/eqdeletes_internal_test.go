package iceberg

import (
	"bytes"
	"encoding/binary"
	"math"
	"path/filepath"
	"strings"
	"testing"

	ice "github.com/apache/iceberg-go"
	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
)

// TestFloatKeys: float values key equal exactly when Java's
// Comparator.naturalOrder has them equal, in both key forms (one
// column's word, and the byte key of several columns).
func TestFloatKeys(t *testing.T) {
	f32 := func(bits uint32) column.Column {
		c := column.Column{Kind: column.Fixed, DType: column.Float32, Width: 1, Data: make([]byte, 4)}
		binary.LittleEndian.PutUint32(c.Data, bits)
		return c
	}
	f64 := func(bits uint64) column.Column {
		c := column.Column{Kind: column.Fixed, DType: column.Float64, Width: 1, Data: make([]byte, 8)}
		binary.LittleEndian.PutUint64(c.Data, bits)
		return c
	}
	for _, c := range []struct {
		name  string
		a, b  column.Column
		equal bool
	}{
		{"float32 NaNs of two payloads", f32(0x7fc00001), f32(0xffc12345), true},
		{"float32 signalling and quiet NaN", f32(0x7f800001), f32(0x7fc00000), true},
		{"float32 -0 and 0", f32(0x80000000), f32(0), false},
		{"float32 NaN and +Inf", f32(0x7fc00000), f32(0x7f800000), false},
		{"float32 1.5", f32(math.Float32bits(1.5)), f32(math.Float32bits(1.5)), true},
		{"float64 NaNs of two payloads", f64(0x7ff8000000000001), f64(0xfff0000000000abc), true},
		{"float64 -0 and 0", f64(1 << 63), f64(0), false},
		{"float64 NaN and -Inf", f64(0x7ff8000000000000), f64(0xfff0000000000000), false},
	} {
		if got := word(&c.a, 0) == word(&c.b, 0); got != c.equal {
			t.Errorf("%s: words equal %v, want %v", c.name, got, c.equal)
		}
		id := column.Column{Kind: column.Fixed, DType: column.Int64, Width: 1, Data: make([]byte, 8)}
		ka := appendKey(nil, []*column.Column{&id, &c.a}, 0)
		kb := appendKey(nil, []*column.Column{&id, &c.b}, 0)
		if got := bytes.Equal(ka, kb); got != c.equal {
			t.Errorf("%s: keys equal %v, want %v", c.name, got, c.equal)
		}
	}
}

// TestEqualityColumn: an equality field id names a top-level column or
// a struct member by its dotted path, with the top-level column its ids
// resolve by; a field inside a list or map, a struct, or one the schema
// lacks is refused, saying which.
func TestEqualityColumn(t *testing.T) {
	schema := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true},
		ice.NestedField{ID: 2, Name: "user", Type: &ice.StructType{FieldList: []ice.NestedField{
			{ID: 3, Name: "uid", Type: ice.PrimitiveTypes.Int64},
			{ID: 4, Name: "geo", Type: &ice.StructType{FieldList: []ice.NestedField{{ID: 5, Name: "cell", Type: ice.PrimitiveTypes.String}}}},
		}}},
		ice.NestedField{ID: 6, Name: "events", Type: &ice.ListType{ElementID: 7, Element: &ice.StructType{FieldList: []ice.NestedField{
			{ID: 8, Name: "item", Type: ice.PrimitiveTypes.Int64}}}}},
		ice.NestedField{ID: 9, Name: "attrs", Type: &ice.MapType{KeyID: 10, KeyType: ice.PrimitiveTypes.String, ValueID: 11, ValueType: ice.PrimitiveTypes.Int64}},
	)
	for _, tc := range []struct {
		id   int
		name string // "": refused
		top  int
		says string
	}{
		{1, "id", 1, ""},
		{3, "user.uid", 2, ""},
		{5, "user.geo.cell", 2, ""},
		{2, "", 0, "primitive types"},
		{8, "", 0, "inside a list or map"},
		{10, "", 0, "inside a list or map"},
		{11, "", 0, "inside a list or map"},
		{99, "", 0, "not in the table's schema"},
	} {
		name, top, err := equalityColumn(schema, tc.id)
		switch {
		case tc.name != "" && (err != nil || name != tc.name || top.ID != tc.top):
			t.Errorf("field %d: %q under %d, %v; want %q under %d", tc.id, name, top.ID, err, tc.name, tc.top)
		case tc.name == "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
			t.Errorf("field %d: %q, %v; want an error saying %q", tc.id, name, err, tc.says)
		}
	}
}

// TestEqualityMemberFoundByNameRefused: an equality delete on a struct
// member that the decoder could find only by name is refused, saying
// why, rather than matched against another column: a member of a struct
// that also holds a member of a type lastmile cannot describe (the
// table's schema then gives no shape for the struct, and a member
// dropped and added again under the same name would match the old one's
// values), and a member whose dotted path is also a top-level column's
// name (Iceberg allows dots in names).
func TestEqualityMemberFoundByNameRefused(t *testing.T) {
	id := ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true}
	user := func(more ...ice.NestedField) ice.NestedField {
		return ice.NestedField{ID: 2, Name: "user", Required: true, Type: &ice.StructType{FieldList: append([]ice.NestedField{
			{ID: 3, Name: "uid", Type: ice.PrimitiveTypes.Int64}}, more...)}}
	}
	for _, tc := range []struct {
		name   string
		schema *ice.Schema
		says   string
	}{
		{"a struct lastmile cannot describe", ice.NewSchema(0, id, user(ice.NestedField{ID: 4, Name: "payload", Type: ice.VariantType{}})),
			"cannot be found by field id"},
		{"a top-level column named as the path", ice.NewSchema(0, id, user(),
			ice.NestedField{ID: 5, Name: "user.uid", Type: ice.PrimitiveTypes.Int64, Required: true}), "is ambiguous"},
		{"a member's name with a dot", ice.NewSchema(0, id, ice.NestedField{ID: 2, Name: "user", Required: true,
			Type: &ice.StructType{FieldList: []ice.NestedField{{ID: 3, Name: "u.id", Type: ice.PrimitiveTypes.Int64}}}}), "is ambiguous"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := &decode.TableSchema{IDs: map[string]int32{}}
			ts.Stored, ts.Nullable, ts.Defaults = storedColumns(tc.schema)
			for _, f := range tc.schema.Fields() {
				ts.IDs[f.Name] = int32(f.ID)
			}
			s := &Scan{Table: "t", Schema: ts}
			spec := ice.NewPartitionSpec()
			b, err := ice.NewDataFileBuilder(spec, ice.EntryContentEqDeletes, filepath.Join(t.TempDir(), "del.parquet"), ice.ParquetFile, nil, nil, nil, 1, 100)
			if err != nil {
				t.Fatal(err)
			}
			seq := int64(2)
			e := ice.NewManifestEntry(ice.EntryStatusADDED, nil, &seq, &seq, b.EqualityFieldIDs([]int{3}).Build())
			if err := s.noteEquality(e, "m", tc.schema, &spec); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("noteEquality: %v, want a refusal saying %q", err, tc.says)
			}
		})
	}
}
