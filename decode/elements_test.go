package decode

import (
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// Parquet schema elements as a table's writers store its columns, for
// TableSchema.Stored in tests.

// leafElement is a primitive column's element.
func leafElement(name string, id int32, rep format.FieldRepetitionType, pt format.Type) format.SchemaElement {
	el := format.SchemaElement{Name: name, FieldID: id}
	el.RepetitionType.Set(rep)
	el.Type.Set(pt)
	return el
}

// listElements is a three-level list of elem (named "element").
func listElements(name string, id int32, rep format.FieldRepetitionType, elem format.SchemaElement) []format.SchemaElement {
	top := format.SchemaElement{Name: name, FieldID: id}
	top.RepetitionType.Set(rep)
	top.NumChildren.Set(1)
	top.ConvertedType.Set(deprecated.List)
	top.LogicalType.Value = &format.ListType{}
	list := format.SchemaElement{Name: "list"}
	list.RepetitionType.Set(format.Repeated)
	list.NumChildren.Set(1)
	elem.Name = "element"
	return []format.SchemaElement{top, list, elem}
}

// optionalDouble and optionalLongList are an optional double and an
// optional list<long> (its elements optional too).
func optionalDouble(name string, id int32) []format.SchemaElement {
	return []format.SchemaElement{leafElement(name, id, format.Optional, format.Double)}
}

func optionalLongList(name string, id int32) []format.SchemaElement {
	return listElements(name, id, format.Optional, leafElement("element", id+100, format.Optional, format.Int64))
}
