package icebergtest

import (
	"fmt"
	"reflect"

	ice "github.com/apache/iceberg-go"
	"github.com/parquet-go/parquet-go"
)

// A table with a struct column (Layout.Nested): user struct<uid long>
// (field ids 11 and 12), null in one row of ten, whose member an
// equality delete file can name ("user.uid").

// UserOf is row id's user.uid, and false where its user is null.
func UserOf(id int64) (int64, bool) { return id % 50, id%10 != 9 }

type (
	nestedUser struct {
		UID int64 `parquet:"uid,id(12)"`
	}
	nestedRow struct {
		ID    int64       `parquet:"id,id(1)"`
		Part  string      `parquet:"part,id(2)"`
		Key   int64       `parquet:"key,id(3)"`
		Score float64     `parquet:"score,id(4)"`
		User  *nestedUser `parquet:"user,id(11),optional"`
	}
)

// nestedField is the column Layout.Nested adds.
var nestedField = ice.NestedField{ID: 11, Name: "user", Type: &ice.StructType{FieldList: []ice.NestedField{
	{ID: 12, Name: "uid", Type: ice.PrimitiveTypes.Int64, Required: true}}}}

// checkNested refuses what Layout.Nested is not combined with.
func checkNested(l Layout) error {
	if l.Nested && (l.FloatScore || l.Hive || l.Imported || l.Dated) {
		return fmt.Errorf("Nested with FloatScore, Hive, Imported or Dated is not supported")
	}
	return nil
}

func (t *Table) writeNested(path string, rows []Row, opts []parquet.WriterOption) error {
	if t.added {
		return fmt.Errorf("Nested with AddColumns is not supported")
	}
	return parquet.WriteFile(path, convertRows(rows, func(r Row) nestedRow {
		n := nestedRow{ID: r.ID, Part: r.Part, Key: r.Key, Score: r.Score}
		if uid, ok := UserOf(r.ID); ok {
			n.User = &nestedUser{uid}
		}
		return n
	}), opts...)
}

// deleteRowType is the row type of an equality delete file on column
// col (field id id, a member of user where col is "user.uid") whose
// values are of type elem, and how to make a row of a value.
func deleteRowType(col string, id int, elem reflect.Type) (reflect.Type, func(v reflect.Value) reflect.Value) {
	if col != "user.uid" {
		typ := reflect.StructOf([]reflect.StructField{{Name: "V", Type: elem, Tag: reflect.StructTag(fmt.Sprintf(`parquet:"%s,id(%d)"`, col, id))}})
		return typ, func(v reflect.Value) reflect.Value {
			row := reflect.New(typ).Elem()
			row.Field(0).Set(v)
			return row
		}
	}
	inner := reflect.StructOf([]reflect.StructField{{Name: "V", Type: elem, Tag: reflect.StructTag(fmt.Sprintf(`parquet:"uid,id(%d)"`, id))}})
	typ := reflect.StructOf([]reflect.StructField{{Name: "U", Type: inner, Tag: `parquet:"user,id(11)"`}})
	return typ, func(v reflect.Value) reflect.Value {
		row := reflect.New(typ).Elem()
		row.Field(0).Field(0).Set(v)
		return row
	}
}
