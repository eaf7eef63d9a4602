package iceberg

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	ice "github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

// TestPartitionValuesOfEveryType: an identity partition value of each
// type Iceberg's manifests carry (as iceberg-go decodes them) becomes the
// same PLAIN bytes as the equal initial default, so that a migrated file
// lacking the column reads its partition value in every row. Before,
// time, decimal, uuid and fixed values were left out, and such a column
// read as null.
func TestPartitionValuesOfEveryType(t *testing.T) {
	u := uuid.MustParse("f79c3e09-677c-4bbd-a479-3f349cb785e7")
	dec := func(unscaled int64, scale int) ice.DecimalLiteral {
		return ice.DecimalLiteral{Val: decimal128.FromI64(unscaled), Scale: scale}
	}
	for _, c := range []struct {
		name string
		typ  ice.Type
		part any // the manifest's value, as iceberg-go gives it
		def  any // the same value as an initial default, in the spec's JSON form
	}{
		{"time", ice.PrimitiveTypes.Time, ice.Time(37800_000_000), "10:30:00"},
		{"decimal(9, 2)", ice.DecimalTypeOf(9, 2), dec(-12345, 2), "-123.45"},
		{"decimal(18, 4)", ice.DecimalTypeOf(18, 4), dec(1234567890123, 4), "123456789.0123"},
		{"decimal(38, 10)", ice.DecimalTypeOf(38, 10), dec(-5, 10), "-0.0000000005"},
		{"uuid", ice.PrimitiveTypes.UUID, u, u.String()},
		{"uuid as bytes", ice.PrimitiveTypes.UUID, [16]byte(u), u.String()},
		{"fixed[3]", ice.FixedTypeOf(3), []byte{0xca, 0xfe, 0x01}, "cafe01"},
		{"binary", ice.PrimitiveTypes.Binary, []byte{0xca, 0xfe}, "cafe"},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, err := plainDefault(c.typ, c.def)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := plainPartition(c.typ, c.part)
			if !ok || !bytes.Equal(got, want) {
				t.Fatalf("partition value %v of %s: %x, %v; want %x, as the default %v", c.part, c.typ, got, ok, want, c.def)
			}
		})
	}
	// A fixed value of the wrong length, or a decimal of another scale
	// than the column's, is left out (the column reads as null), never
	// read as another value.
	for _, c := range []struct {
		typ  ice.Type
		part any
	}{
		{ice.FixedTypeOf(4), []byte{1, 2, 3}},
		{ice.DecimalTypeOf(9, 2), dec(5, 3)},
	} {
		if b, ok := plainPartition(c.typ, c.part); ok {
			t.Errorf("%v of %s: %x; want it left out", c.part, c.typ, b)
		}
	}
}
