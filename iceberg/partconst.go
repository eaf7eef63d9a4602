package iceberg

import (
	"maps"
	"math"

	ice "github.com/apache/iceberg-go"
	"github.com/google/uuid"

	"github.com/lastmile/lastmile/decode"
)

// Identity partition values as columns. A table that Iceberg's migrate or
// add_files made of a Hive table keeps Hive's files, which do not hold
// the partition columns: their values are in the directory names, and
// the table keeps them as each file's identity partition values. Iceberg's
// readers give such a column its file's partition value in every row
// (Java's PartitionUtil.constantsMap); lastmile read it as a column added
// since the file was written, null in every row. Each such file now gets
// the values as the initial defaults of those columns
// (decode.TableSchema.Defaults), which the decoder uses where the file
// lacks the column, and only there.

// partitionDefaults returns, by source field id, df's identity partition
// values of top-level columns in the PLAIN encoding of their stored types;
// nil when it has none. A null value, or one of a type it does not take,
// is left out: such a column reads as null where the file lacks it.
func partitionDefaults(df ice.DataFile, schema *ice.Schema, spec *ice.PartitionSpec) map[int32][]byte {
	var out map[int32][]byte
	part := df.Partition()
	for _, pf := range spec.Fields() {
		if _, ok := pf.Transform.(ice.IdentityTransform); !ok {
			continue
		}
		f, ok := schema.FindFieldByID(pf.SourceID())
		if !ok {
			continue
		}
		if _, top := topLevel(schema, f.ID); !top {
			continue
		}
		b, ok := plainPartition(f.Type, part[pf.FieldID])
		if !ok {
			continue
		}
		if out == nil {
			out = map[int32][]byte{}
		}
		out[int32(f.ID)] = b
	}
	return out
}

// plainPartition is the partition value v of a column of type t in PLAIN
// encoding (as plainDefault writes an initial default).
func plainPartition(t ice.Type, v any) ([]byte, bool) {
	switch x := v.(type) {
	case bool:
		if _, ok := t.(ice.BooleanType); ok {
			if x {
				return []byte{1}, true
			}
			return []byte{0}, true
		}
	case int32:
		switch t.(type) {
		case ice.Int32Type:
			return le(4, uint64(uint32(x))), true
		case ice.Int64Type: // promoted since the file was written
			return le(8, uint64(int64(x))), true
		}
	case int64:
		if _, ok := t.(ice.Int64Type); ok {
			return le(8, uint64(x)), true
		}
	case float32:
		switch t.(type) {
		case ice.Float32Type:
			return le(4, uint64(math.Float32bits(x))), true
		case ice.Float64Type:
			return le(8, math.Float64bits(float64(x))), true
		}
	case float64:
		if _, ok := t.(ice.Float64Type); ok {
			return le(8, math.Float64bits(x)), true
		}
	case string:
		if _, ok := t.(ice.StringType); ok {
			return append(le(4, uint64(len(x))), x...), true
		}
	case []byte:
		switch t := t.(type) {
		case ice.BinaryType:
			return append(le(4, uint64(len(x))), x...), true
		case ice.FixedType:
			if len(x) == t.Len() {
				return x, true
			}
		case ice.UUIDType:
			if len(x) == 16 {
				return x, true
			}
		}
	case uuid.UUID:
		if _, ok := t.(ice.UUIDType); ok {
			return x[:], true
		}
	case [16]byte:
		if _, ok := t.(ice.UUIDType); ok {
			return x[:], true
		}
	case ice.Time:
		if _, ok := t.(ice.TimeType); ok {
			return le(8, uint64(x)), true
		}
	case ice.DecimalLiteral:
		if t, ok := t.(ice.DecimalType); ok && x.Scale == t.Scale() {
			b, err := decimalDefault(t, ice.Decimal(x).String())
			return b, err == nil
		}
	case ice.Date:
		if _, ok := t.(ice.DateType); ok {
			return le(4, uint64(uint32(int32(x)))), true
		}
	case ice.Timestamp:
		switch t.(type) {
		case ice.TimestampType, ice.TimestampTzType:
			return le(8, uint64(x)), true
		}
	case ice.TimestampNano:
		switch t.(type) {
		case ice.TimestampNsType, ice.TimestampTzNsType:
			return le(8, uint64(x)), true
		}
	}
	return nil, false
}

// SchemaOf returns the table schema that f is read by: the scan's, with
// f's identity partition values as the defaults of the columns it lacks.
func (s *Scan) SchemaOf(f *File) *decode.TableSchema {
	if len(f.partDefaults) == 0 || s.Schema == nil {
		return s.Schema
	}
	ts := *s.Schema
	ts.Defaults = maps.Clone(s.Schema.Defaults)
	if ts.Defaults == nil {
		ts.Defaults = map[int32][]byte{}
	}
	maps.Copy(ts.Defaults, f.partDefaults)
	return &ts
}
