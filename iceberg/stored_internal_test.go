package iceberg

import (
	"context"
	"errors"
	"maps"
	"math/big"
	"path/filepath"
	"testing"
	"unsafe"

	ice "github.com/apache/iceberg-go"
	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/parquet-go/parquet-go"
)

// TestStoredColumn: a column added after a file was written resolves,
// in that file, from storedColumn's schema to the kind and type a file
// holding it gives, nullable, and decodes as nulls; types the decoder
// cannot read are refused as they would be in a file.
func TestStoredColumn(t *testing.T) {
	type row struct {
		ID int64 `parquet:"id,id(1)"`
	}
	path := filepath.Join(t.TempDir(), "old.parquet")
	if err := parquet.WriteFile(path, []row{{1}, {2}, {3}}); err != nil {
		t.Fatal(err)
	}
	structOf := &ice.StructType{FieldList: []ice.NestedField{
		{ID: 20, Name: "a", Type: ice.PrimitiveTypes.Int32, Required: true},
		{ID: 21, Name: "b", Type: ice.PrimitiveTypes.String},
	}}
	tests := []struct {
		name    string
		typ     ice.Type
		column  string // projected: "x" or a member
		kind    column.Kind
		dtype   column.DType
		decimal bool
		err     error
	}{
		{"boolean", ice.PrimitiveTypes.Bool, "x", column.Fixed, column.Bool, false, nil},
		{"int", ice.PrimitiveTypes.Int32, "x", column.Fixed, column.Int32, false, nil},
		{"long", ice.PrimitiveTypes.Int64, "x", column.Fixed, column.Int64, false, nil},
		{"float", ice.PrimitiveTypes.Float32, "x", column.Fixed, column.Float32, false, nil},
		{"double", ice.PrimitiveTypes.Float64, "x", column.Fixed, column.Float64, false, nil},
		{"date", ice.PrimitiveTypes.Date, "x", column.Fixed, column.Int32, false, nil},
		{"time", ice.PrimitiveTypes.Time, "x", column.Fixed, column.Int64, false, nil},
		{"timestamp", ice.PrimitiveTypes.Timestamp, "x", column.Fixed, column.Int64, false, nil},
		{"timestamptz", ice.PrimitiveTypes.TimestampTz, "x", column.Fixed, column.Int64, false, nil},
		{"timestamp_ns", ice.PrimitiveTypes.TimestampNs, "x", column.Fixed, column.Int64, false, nil},
		{"string", ice.PrimitiveTypes.String, "x", column.Bytes, column.Uint8, false, nil},
		{"binary", ice.PrimitiveTypes.Binary, "x", column.Bytes, column.Uint8, false, nil},
		{"decimal(9, 2)", ice.DecimalTypeOf(9, 2), "x", column.Fixed, column.Float64, true, nil},
		{"decimal(18, 4)", ice.DecimalTypeOf(18, 4), "x", column.Fixed, column.Float64, true, nil},
		{"decimal(38, 10)", ice.DecimalTypeOf(38, 10), "x", column.Fixed, column.Float64, true, nil},
		{"list<float>", &ice.ListType{ElementID: 30, Element: ice.PrimitiveTypes.Float32}, "x", column.List, column.Float32, false, nil},
		{"list<long>, required elements", &ice.ListType{ElementID: 30, Element: ice.PrimitiveTypes.Int64, ElementRequired: true},
			"x", column.List, column.Int64, false, nil},
		{"a struct's member", structOf, "x.a", column.Fixed, column.Int32, false, nil},
		{"a struct's other member", structOf, "x.b", column.Bytes, column.Uint8, false, nil},
		{"a map's values", &ice.MapType{KeyID: 40, KeyType: ice.PrimitiveTypes.Int64, ValueID: 41, ValueType: ice.PrimitiveTypes.Float64},
			"x.value", column.List, column.Float64, false, nil},
		{"uuid", ice.PrimitiveTypes.UUID, "x", 0, 0, false, decode.ErrUnsupported},
		{"list<string>", &ice.ListType{ElementID: 30, Element: ice.PrimitiveTypes.String}, "x", 0, 0, false, decode.ErrUnsupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := ice.NestedField{ID: 2, Name: "x", Type: tc.typ}
			stored, nullable, _ := storedColumns(ice.NewSchema(0, ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true}, f))
			if _, ok := stored[2]; !ok || len(stored) != 2 || !nullable[2] || nullable[1] {
				t.Fatalf("stored %v, nullable %v; want both columns stored, field 2 nullable", stored, nullable)
			}
			table := &decode.TableSchema{IDs: map[string]int32{"id": 1, "x": 2}, Stored: stored, Nullable: nullable}
			plan, err := decode.PlanFiles(context.Background(), []string{path},
				decode.PlanOptions{Columns: []string{tc.column}, Table: func(string) *decode.TableSchema { return table }})
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("plan: %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := plan.Fields[0]
			if !got.Absent || !got.Nullable || got.Kind != tc.kind || got.DType != tc.dtype || got.Decimal != tc.decimal {
				t.Fatalf("field %+v, want absent and nullable, kind %v, dtype %v, decimal %v", got, tc.kind, tc.dtype, tc.decimal)
			}
			d := plan.NewDecoder()
			defer d.Close()
			var b column.Batch
			if err := d.Decode(context.Background(), plan.Units[0], &b); err != nil {
				t.Fatal(err)
			}
			if c := &b.Columns[0]; c.Len != 3 || c.NullCount() != 3 {
				t.Fatalf("%d rows, %d null; want 3 null", c.Len, c.NullCount())
			}
		})
	}
}

// TestNullableColumns: a required column, or one with an initial
// default (format v3), does not read as nulls in a file without it; an
// optional struct member does.
func TestNullableColumns(t *testing.T) {
	s := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "required", Type: ice.PrimitiveTypes.Int64, Required: true},
		ice.NestedField{ID: 2, Name: "defaulted", Type: ice.PrimitiveTypes.Int64, InitialDefault: int64(7)},
		ice.NestedField{ID: 3, Name: "plain", Type: ice.PrimitiveTypes.Int64},
		ice.NestedField{ID: 4, Name: "user", Type: &ice.StructType{FieldList: []ice.NestedField{
			{ID: 5, Name: "age", Type: ice.PrimitiveTypes.Int32, Required: true},
			{ID: 6, Name: "city", Type: ice.PrimitiveTypes.String},
		}}, Required: true})
	stored, nullable, defaults := storedColumns(s)
	if len(stored) != 4 {
		t.Fatalf("%d columns stored, want 4", len(stored))
	}
	want := map[int32]bool{3: true, 6: true}
	if !maps.Equal(nullable, want) {
		t.Fatalf("nullable %v, want %v", nullable, want)
	}
	if len(defaults) != 1 || string(defaults[2]) != string([]byte{7, 0, 0, 0, 0, 0, 0, 0}) {
		t.Fatalf("defaults %v, want field 2's 7", defaults)
	}
}

// TestPlainDefault: an initial default, as the metadata's JSON gives it,
// in the PLAIN encoding of its column's stored type; a type or value it
// does not take is an error.
func TestPlainDefault(t *testing.T) {
	tests := []struct {
		name string
		typ  ice.Type
		v    any
		want []byte // nil: an error
	}{
		{"boolean", ice.PrimitiveTypes.Bool, true, []byte{1}},
		{"int from JSON", ice.PrimitiveTypes.Int32, float64(-2), []byte{0xfe, 0xff, 0xff, 0xff}},
		{"long", ice.PrimitiveTypes.Int64, float64(1 << 40), []byte{0, 0, 0, 0, 0, 1, 0, 0}},
		{"float", ice.PrimitiveTypes.Float32, 0.5, []byte{0, 0, 0, 0x3f}},
		{"double", ice.PrimitiveTypes.Float64, 0.5, []byte{0, 0, 0, 0, 0, 0, 0xe0, 0x3f}},
		{"string", ice.PrimitiveTypes.String, "free", []byte{4, 0, 0, 0, 'f', 'r', 'e', 'e'}},
		{"date", ice.PrimitiveTypes.Date, "1970-01-03", []byte{2, 0, 0, 0}},
		{"timestamp", ice.PrimitiveTypes.Timestamp, "1970-01-01T00:00:01.000002", []byte{0x42, 0x42, 0x0f, 0, 0, 0, 0, 0}},
		{"timestamptz", ice.PrimitiveTypes.TimestampTz, "1970-01-01T01:00:01+01:00", []byte{0x40, 0x42, 0x0f, 0, 0, 0, 0, 0}},
		{"decimal(9, 2)", ice.DecimalTypeOf(9, 2), "14.20", []byte{0x8c, 0x05, 0, 0}},
		{"decimal(18, 4)", ice.DecimalTypeOf(18, 4), "-1", []byte{0xf0, 0xd8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"decimal(38, 0)", ice.DecimalTypeOf(38, 0), "-1", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"a decimal with more places", ice.DecimalTypeOf(9, 2), "1.234", nil},
		{"a fraction for an int", ice.PrimitiveTypes.Int32, 1.5, nil},
		{"an int out of range", ice.PrimitiveTypes.Int32, float64(1 << 40), nil},
		{"a string for a long", ice.PrimitiveTypes.Int64, "7", nil},
		{"a date not in the spec's form", ice.PrimitiveTypes.Date, "03/01/1970", nil},
		{"timestamp_ns", ice.PrimitiveTypes.TimestampNs, "1970-01-01T00:00:01.000000002", []byte{0x02, 0xca, 0x9a, 0x3b, 0, 0, 0, 0}},
		{"timestamptz_ns", ice.PrimitiveTypes.TimestampTzNs, "1970-01-01T01:00:01+01:00", []byte{0x00, 0xca, 0x9a, 0x3b, 0, 0, 0, 0}},
		{"time", ice.PrimitiveTypes.Time, "00:00:01.000002", []byte{0x42, 0x42, 0x0f, 0, 0, 0, 0, 0}},
		{"binary", ice.PrimitiveTypes.Binary, "0aff", []byte{2, 0, 0, 0, 0x0a, 0xff}},
		{"fixed[2]", ice.FixedTypeOf(2), "0aff", []byte{0x0a, 0xff}},
		{"uuid", ice.PrimitiveTypes.UUID, "f79c3e09-677c-4bbd-a479-3f349cb785e7",
			[]byte{0xf7, 0x9c, 0x3e, 0x09, 0x67, 0x7c, 0x4b, 0xbd, 0xa4, 0x79, 0x3f, 0x34, 0x9c, 0xb7, 0x85, 0xe7}},
		{"a uuid in braces", ice.PrimitiveTypes.UUID, "{f79c3e09-677c-4bbd-a479-3f349cb785e7}", nil},
		{"fixed[2] of 3 bytes", ice.FixedTypeOf(2), "0aff00", nil},
		{"binary of odd digits", ice.PrimitiveTypes.Binary, "0af", nil},
		{"a time past the day", ice.PrimitiveTypes.Time, "24:00:00", nil},
		{"a timestamp_ns past 2262", ice.PrimitiveTypes.TimestampNs, "2300-01-01T00:00:00", nil},
		{"a timestamptz_ns before 1677", ice.PrimitiveTypes.TimestampTzNs, "1600-01-01T00:00:00+00:00", nil},
		{"a list", &ice.ListType{ElementID: 3, Element: ice.PrimitiveTypes.Int64}, []any{}, nil},
	}
	for _, tc := range tests {
		got, err := plainDefault(tc.typ, tc.v)
		if tc.want == nil {
			if err == nil {
				t.Errorf("%s: %v accepted as %v", tc.name, tc.v, got)
			}
			continue
		}
		if err != nil || string(got) != string(tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// TestDecimalBytes: the fewest bytes whose two's complement holds every
// decimal of p digits, as the Iceberg spec sizes FIXED decimals.
func TestDecimalBytes(t *testing.T) {
	for p := int32(1); p <= 38; p++ {
		limit := new(big.Int).Sub(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(p)), nil), big.NewInt(1))
		want := int32(1)
		for new(big.Int).Lsh(big.NewInt(1), uint(8*want-1)).Cmp(limit) <= 0 {
			want++
		}
		if got := decimalBytes(p); got != want {
			t.Errorf("decimal(%d): %d bytes, want %d", p, got, want)
		}
	}
}

// TestPromotedFromStored: a file written before the table promoted its
// columns (int to long, float to double, decimal(9, 2) to decimal(18,
// 2)) reads them as the table's types, from the schema storedColumns
// writes for them.
func TestPromotedFromStored(t *testing.T) {
	type old struct {
		N int32   `parquet:"n,id(2)"`
		X float32 `parquet:"x,id(3)"`
		D int32   `parquet:"d,decimal(2:9),id(4)"`
	}
	path := filepath.Join(t.TempDir(), "old.parquet")
	if err := parquet.WriteFile(path, []old{{-5, 0.25, 1234}, {7, -1.5, -1}}); err != nil {
		t.Fatal(err)
	}
	stored, nullable, _ := storedColumns(ice.NewSchema(1,
		ice.NestedField{ID: 2, Name: "n", Type: ice.PrimitiveTypes.Int64, Required: true},
		ice.NestedField{ID: 3, Name: "x", Type: ice.PrimitiveTypes.Float64, Required: true},
		ice.NestedField{ID: 4, Name: "d", Type: ice.DecimalTypeOf(18, 2), Required: true}))
	table := &decode.TableSchema{IDs: map[string]int32{"n": 2, "x": 3, "d": 4}, Stored: stored, Nullable: nullable}
	plan, err := decode.PlanFiles(context.Background(), []string{path}, decode.PlanOptions{Table: func(string) *decode.TableSchema { return table }})
	if err != nil {
		t.Fatal(err)
	}
	d := plan.NewDecoder()
	defer d.Close()
	var b column.Batch
	if err := d.Decode(context.Background(), plan.Units[0], &b); err != nil {
		t.Fatal(err)
	}
	n := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b.Columns[0].Data))), 2)
	x := unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(b.Columns[1].Data))), 2)
	dec := unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(b.Columns[2].Data))), 2)
	if b.Columns[0].DType != column.Int64 || b.Columns[1].DType != column.Float64 || n[0] != -5 || n[1] != 7 ||
		x[0] != 0.25 || x[1] != -1.5 || dec[0] != 12.34 || dec[1] != -0.01 {
		t.Fatalf("n %v x %v d %v (dtypes %v %v)", n, x, dec, b.Columns[0].DType, b.Columns[1].DType)
	}
}
