package iceberg

import (
	"fmt"

	ice "github.com/apache/iceberg-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// A column added to a table after some of its data files were written is
// not in those files, and reads as null in each of their rows. The
// decoder resolves such a column from its Parquet schema as the table's
// writers would store it (decode.TableSchema.Stored), so that it has the
// type, kind and nullability a file holding it gives. storedColumn
// writes that schema from the column's Iceberg type, by the Parquet
// appendix of the Iceberg spec: three-level lists and maps, and each
// primitive's physical type and annotation.

// storedColumns gives each top-level column of schema as its writers
// store it (decode.TableSchema.Stored), leaving out those of a type
// storedColumn does not describe; the field ids that read as nulls in a
// file written before they were added (decode.TableSchema.Nullable):
// optional columns and struct members without an initial default; and
// the initial defaults, which such a file reads instead
// (decode.TableSchema.Defaults, defaults.go). A required column without
// a default, or a default lastmile does not read, is in neither: a file
// without it is refused.
func storedColumns(schema *ice.Schema) (stored map[int32][]format.SchemaElement, nullable map[int32]bool, defaults map[int32][]byte) {
	stored, nullable, defaults = map[int32][]format.SchemaElement{}, map[int32]bool{}, map[int32][]byte{}
	var note func(f ice.NestedField)
	note = func(f ice.NestedField) {
		switch {
		case f.InitialDefault != nil:
			if b, err := plainDefault(f.Type, f.InitialDefault); err == nil {
				defaults[int32(f.ID)] = b
			}
		case !f.Required:
			nullable[int32(f.ID)] = true
		}
		if st, ok := f.Type.(*ice.StructType); ok {
			for _, m := range st.FieldList {
				note(m)
			}
		}
	}
	for _, f := range schema.Fields() {
		if els, err := storedColumn(f); err == nil {
			stored[int32(f.ID)] = els
		}
		note(f)
	}
	return stored, nullable, defaults
}

// storedColumn returns field f's Parquet schema elements, its own first.
func storedColumn(f ice.NestedField) ([]format.SchemaElement, error) {
	rep := format.Optional
	if f.Required {
		rep = format.Required
	}
	return appendStored(nil, f.Name, int32(f.ID), rep, f.Type)
}

func appendStored(els []format.SchemaElement, name string, id int32, rep format.FieldRepetitionType, t ice.Type) ([]format.SchemaElement, error) {
	el := format.SchemaElement{Name: name, FieldID: id}
	el.RepetitionType.Set(rep)
	switch t := t.(type) {
	case *ice.StructType:
		el.NumChildren.Set(int32(len(t.FieldList)))
		els = append(els, el)
		for _, c := range t.FieldList {
			var err error
			if els, err = appendStored(els, c.Name, int32(c.ID), repetitionOf(c.Required), c.Type); err != nil {
				return nil, err
			}
		}
		return els, nil
	case *ice.ListType:
		els = appendRepeated(els, el, deprecated.List, &format.ListType{}, "list", 1)
		return appendStored(els, "element", int32(t.ElementID), repetitionOf(t.ElementRequired), t.Element)
	case *ice.MapType:
		els = appendRepeated(els, el, deprecated.Map, &format.MapType{}, "key_value", 2)
		els, err := appendStored(els, "key", int32(t.KeyID), format.Required, t.KeyType)
		if err != nil {
			return nil, err
		}
		return appendStored(els, "value", int32(t.ValueID), repetitionOf(t.ValueRequired), t.ValueType)
	}
	if err := setPrimitive(&el, t); err != nil {
		return nil, err
	}
	return append(els, el), nil
}

// appendRepeated appends a list's or map's annotated group el and the
// repeated group named inner, of n children, inside it: the outer two
// levels of the three the spec writes.
func appendRepeated(els []format.SchemaElement, el format.SchemaElement, ct deprecated.ConvertedType, lt format.LogicalTypeValue,
	inner string, n int32) []format.SchemaElement {
	el.NumChildren.Set(1)
	el.ConvertedType.Set(ct)
	el.LogicalType.Value = lt
	rep := format.SchemaElement{Name: inner}
	rep.RepetitionType.Set(format.Repeated)
	rep.NumChildren.Set(n)
	return append(els, el, rep)
}

func repetitionOf(required bool) format.FieldRepetitionType {
	if required {
		return format.Required
	}
	return format.Optional
}

// setPrimitive sets el's physical type and annotation for Iceberg type t.
func setPrimitive(el *format.SchemaElement, t ice.Type) error {
	micros := format.TimeUnit{Value: &format.MicroSeconds{}}
	nanos := format.TimeUnit{Value: &format.NanoSeconds{}}
	set := func(pt format.Type, lt format.LogicalTypeValue, ct deprecated.ConvertedType, hasCT bool) {
		el.Type.Set(pt)
		el.LogicalType.Value = lt
		if hasCT {
			el.ConvertedType.Set(ct)
		}
	}
	switch t := t.(type) {
	case ice.BooleanType:
		set(format.Boolean, nil, 0, false)
	case ice.Int32Type:
		set(format.Int32, nil, 0, false)
	case ice.Int64Type:
		set(format.Int64, nil, 0, false)
	case ice.Float32Type:
		set(format.Float, nil, 0, false)
	case ice.Float64Type:
		set(format.Double, nil, 0, false)
	case ice.DateType:
		set(format.Int32, &format.DateType{}, deprecated.Date, true)
	case ice.TimeType:
		set(format.Int64, &format.TimeType{Unit: micros}, deprecated.TimeMicros, true)
	case ice.TimestampType:
		set(format.Int64, &format.TimestampType{Unit: micros}, deprecated.TimestampMicros, true)
	case ice.TimestampTzType:
		set(format.Int64, &format.TimestampType{IsAdjustedToUTC: true, Unit: micros}, deprecated.TimestampMicros, true)
	case ice.TimestampNsType:
		set(format.Int64, &format.TimestampType{Unit: nanos}, 0, false)
	case ice.TimestampTzNsType:
		set(format.Int64, &format.TimestampType{IsAdjustedToUTC: true, Unit: nanos}, 0, false)
	case ice.StringType:
		set(format.ByteArray, &format.StringType{}, deprecated.UTF8, true)
	case ice.BinaryType:
		set(format.ByteArray, nil, 0, false)
	case ice.UUIDType:
		set(format.FixedLenByteArray, &format.UUIDType{}, 0, false)
		el.TypeLength.Set(16)
	case ice.FixedType:
		set(format.FixedLenByteArray, nil, 0, false)
		el.TypeLength.Set(int32(t.Len()))
	case ice.DecimalType:
		setDecimal(el, int32(t.Precision()), int32(t.Scale()))
	default:
		return fmt.Errorf("column %q: Iceberg type %s has no Parquet form lastmile knows", el.Name, t)
	}
	return nil
}

// setDecimal stores decimal(p, s) as Iceberg's writers do: INT32 up to 9
// digits, INT64 up to 18, else the fewest bytes of FIXED_LEN_BYTE_ARRAY
// that hold p digits.
func setDecimal(el *format.SchemaElement, p, s int32) {
	switch {
	case p <= 9:
		el.Type.Set(format.Int32)
	case p <= 18:
		el.Type.Set(format.Int64)
	default:
		el.Type.Set(format.FixedLenByteArray)
		el.TypeLength.Set(decimalBytes(p))
	}
	el.LogicalType.Value = &format.DecimalType{Precision: p, Scale: s}
	el.ConvertedType.Set(deprecated.Decimal)
	el.Precision.Set(p)
	el.Scale.Set(s)
}

// decimalBytes is the fewest bytes of a two's complement integer that
// holds every p-digit number: 10^p - 1 < 2^(8n-1).
func decimalBytes(p int32) int32 {
	bits := float64(p)*3.321928094887362 + 1 // log2(10)
	return int32((int(bits) + 8) / 8)
}
