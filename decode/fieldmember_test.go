package decode

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// A table with a struct column user (field id 10) over its history: its
// member "age" (11) renamed "years", and "city" (13) added since.
type (
	memberRowOld struct {
		ID   int64 `parquet:"id,id(1)"`
		User struct {
			Age  int32  `parquet:"age,id(11)"`
			Name string `parquet:"name,id(12)"`
		} `parquet:"user,id(10)"`
	}
	memberRowNew struct {
		ID   int64 `parquet:"id,id(1)"`
		User struct {
			Years int32   `parquet:"years,id(11)"`
			Name  string  `parquet:"name,id(12)"`
			City  *string `parquet:"city,id(13),optional"`
		} `parquet:"user,id(10)"`
	}
	// city dropped, and another city (14) added: not the table's
	memberRowReadded struct {
		ID   int64 `parquet:"id,id(1)"`
		User struct {
			Years int32  `parquet:"years,id(11)"`
			Name  string `parquet:"name,id(12)"`
			City  string `parquet:"city,id(14)"`
		} `parquet:"user,id(10)"`
	}
	memberRowPlain struct {
		ID   int64 `parquet:"id"`
		User struct {
			Age  int32  `parquet:"age"`
			Name string `parquet:"name"`
		} `parquet:"user"`
	}
)

// TestStructMembersByID: with the table's shape of a struct column
// (TableSchema.Stored), a dotted name walks its members by field id: a
// member renamed since a file was written reads under its new name, one
// added since reads as nulls in that file, one dropped and added again,
// or added without leave to read as nulls, is refused; files without
// ids follow the name mapping's dotted paths.
func TestStructMembersByID(t *testing.T) {
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name+".parquet") }
	writeMemberRows(t, path("old"), 0, 300, func(id int64) memberRowOld {
		var r memberRowOld
		r.ID, r.User.Age, r.User.Name = id, int32(id%100), fmt.Sprint("n", id)
		return r
	})
	writeMemberRows(t, path("new"), 300, 200, func(id int64) memberRowNew {
		var r memberRowNew
		city := fmt.Sprint("c", id)
		r.ID, r.User.Years, r.User.Name, r.User.City = id, int32(id%100), fmt.Sprint("n", id), &city
		return r
	})
	writeMemberRows(t, path("readded"), 500, 50, func(id int64) memberRowReadded {
		var r memberRowReadded
		r.ID, r.User.Years, r.User.Name, r.User.City = id, int32(id%100), fmt.Sprint("n", id), "x"
		return r
	})
	writeMemberRows(t, path("plain"), 600, 100, func(id int64) memberRowPlain {
		var r memberRowPlain
		r.ID, r.User.Age, r.User.Name = id, int32(id%100), fmt.Sprint("n", id)
		return r
	})
	table := &TableSchema{IDs: map[string]int32{"id": 1, "user": 10},
		Stored:   map[int32][]format.SchemaElement{1: {leafElement("id", 1, format.Required, format.Int64)}, 10: userStruct()},
		Nullable: map[int32]bool{11: true, 12: true, 13: true},
		Mapped:   map[string]int32{"id": 1, "user": 10, "user.age": 11, "user.name": 12},
		Order:    []string{"id", "user"}}
	strict := *table
	strict.Nullable = map[int32]bool{11: true, 12: true}
	tests := []struct {
		name   string
		files  []string
		table  *TableSchema
		cols   []string
		rows   int
		err    error
		says   string
		fields []string // where cols is nil
	}{
		{"renamed and added, the old file first", []string{"old", "new"}, table, []string{"id", "user.years", "user.city"}, 500, nil, "", nil},
		{"renamed and added, the new file first", []string{"new", "old"}, table, []string{"user.city", "user.years", "id"}, 500, nil, "", nil},
		{"every column", []string{"old", "new"}, table, nil, 500, nil, "", []string{"id", "user.years", "user.name", "user.city"}},
		{"no field ids, by the name mapping", []string{"plain", "new"}, table, []string{"id", "user.years", "user.city"}, 300, nil, "", nil},
		{"the old name", []string{"old"}, table, []string{"user.age"}, 0, ErrMissingColumn, `the table has no column "user.age"`, nil},
		{"dropped and added again", []string{"readded"}, table, []string{"id", "user.city"}, 0, ErrSchemaMismatch,
			"field id 14, the table's column of that name is field id 13", nil},
		{"added, but not to read as nulls", []string{"old"}, &strict, []string{"user.city"}, 0, ErrMissingColumn, "no column with field id 13", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var in []string
			for _, f := range tc.files {
				in = append(in, path(f))
			}
			plan := planTable(t, in, tc.cols, tc.table, tc.err, tc.says)
			if plan == nil {
				return
			}
			if names := fieldNames(plan); tc.cols == nil && !slices.Equal(names, tc.fields) {
				t.Fatalf("fields %v, want %v", names, tc.fields)
			}
			n := eachUnit(t, plan, func(u Unit, b *column.Batch, _ int) { checkMembers(t, u.File, plan.Fields, b) })
			if n != tc.rows {
				t.Fatalf("%d rows, want %d", n, tc.rows)
			}
			decodeVerified(t, plan) // as a CPU peer checks each unit
		})
	}
	t.Run("added with an initial default", func(t *testing.T) {
		defaulted := *table
		defaulted.Nullable = strict.Nullable
		defaulted.Defaults = map[int32][]byte{13: append([]byte{7, 0, 0, 0}, "nowhere"...)}
		plan := planTable(t, []string{path("old")}, []string{"id", "user.city"}, &defaulted, nil, "")
		eachUnit(t, plan, func(u Unit, b *column.Batch, _ int) {
			c := &b.Columns[1]
			for r := range b.Rows {
				if got := string(c.Data[c.Offsets[r]:c.Offsets[r+1]]); got != "nowhere" || c.NullCount() != 0 {
					t.Fatalf("row %d: city %q (%d null), want \"nowhere\"", r, got, c.NullCount())
				}
			}
		})
	})
}

// checkMembers checks a batch of memberRow*: years = id mod 100, name
// "n<id>", city "c<id>" in the new file and null elsewhere.
func checkMembers(t *testing.T, file string, fields []Field, b *column.Batch) {
	t.Helper()
	var ids []int64
	for i, f := range fields {
		if f.Name == "id" {
			ids = unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b.Columns[i].Data))), b.Rows)
		}
	}
	isNew := strings.HasSuffix(file, "new.parquet")
	for i, f := range fields {
		c := &b.Columns[i]
		for r := range b.Rows {
			id := int64(r)
			if ids != nil {
				id = ids[r]
			}
			var got, want string
			switch f.Name {
			case "id":
				continue
			case "user.years":
				got, want = fmt.Sprint(unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(c.Data))), b.Rows)[r]), fmt.Sprint(id%100)
			case "user.name":
				got, want = string(c.Data[c.Offsets[r]:c.Offsets[r+1]]), fmt.Sprint("n", id)
			case "user.city":
				got = string(c.Data[c.Offsets[r]:c.Offsets[r+1]])
				if c.Valid != nil && c.Valid[r] == 0 {
					got = "null"
				}
				want = "null"
				if isNew {
					want = fmt.Sprint("c", id)
				}
			default:
				t.Fatalf("field %q", f.Name)
			}
			if ids != nil && got != want {
				t.Fatalf("%s row %d: %s %q, want %q", file, r, f.Name, got, want)
			}
		}
	}
}

func writeMemberRows[T any](t *testing.T, path string, first, n int, mk func(id int64) T) {
	rows := make([]T, n)
	for i := range rows {
		rows[i] = mk(int64(first + i))
	}
	writePG(t, path, rows, "snappy", 1)
}

// userStruct is user as the table stores it now: struct<years int,
// name string, city string>, the members optional.
func userStruct() []format.SchemaElement {
	top := format.SchemaElement{Name: "user", FieldID: 10}
	top.RepetitionType.Set(format.Required)
	top.NumChildren.Set(3)
	years := leafElement("years", 11, format.Optional, format.Int32)
	els := []format.SchemaElement{top, years}
	for i, name := range []string{"name", "city"} {
		el := leafElement(name, int32(12+i), format.Optional, format.ByteArray)
		el.ConvertedType.Set(deprecated.UTF8)
		el.LogicalType.Value = &format.StringType{}
		els = append(els, el)
	}
	return els
}
