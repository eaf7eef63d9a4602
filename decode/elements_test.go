package decode

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
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

// planTable plans in, one input each in this order, projecting cols
// (nil: every column) of table's files. Where want is not nil it checks
// that planning fails with it, saying says, and returns nil.
func planTable(t *testing.T, in, cols []string, table *TableSchema, want error, says string) *Plan {
	t.Helper()
	plan, err := PlanFiles(context.Background(), in, PlanOptions{Columns: cols, Table: func(string) *TableSchema { return table }})
	if want != nil {
		if !errors.Is(err, want) || !strings.Contains(err.Error(), says) {
			t.Fatalf("error %v, want %v saying %q", err, want, says)
		}
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// fieldNames is the names of plan's fields.
func fieldNames(plan *Plan) []string {
	var names []string
	for _, f := range plan.Fields {
		names = append(names, f.Name)
	}
	return names
}

// decodeVerified decodes every unit of plan as a CPU peer does, checking
// each against its file's footer first, and returns the decoder, open
// until the test ends.
func decodeVerified(t *testing.T, plan *Plan) *Decoder {
	t.Helper()
	d := plan.NewDecoder()
	t.Cleanup(func() { d.Close() })
	d.VerifyUnits()
	var b column.Batch
	for _, u := range plan.Units {
		if err := d.Decode(context.Background(), u, &b); err != nil {
			t.Fatalf("verified decode: %v", err)
		}
	}
	return d
}
