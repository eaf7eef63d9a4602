package decode

import (
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/format"
)

// Rows of a table whose events, a list of structs, renamed a field of
// its elements (item to item_id), kept another (ts), and dropped and
// added again a third (kind).
type (
	eventOld struct {
		Item int64 `parquet:"item,id(8)"`
		TS   int64 `parquet:"ts,id(9)"`
		Kind int32 `parquet:"kind,id(10)"`
	}
	eventRowOld struct {
		ID     int64      `parquet:"id,id(1)"`
		Events []eventOld `parquet:"events,id(6),list"`
	}
	eventNew struct {
		ItemID int64 `parquet:"item_id,id(8)"`
		TS     int64 `parquet:"ts,id(9)"`
		Kind   int32 `parquet:"kind,id(11)"`
	}
	eventRowNew struct {
		ID     int64      `parquet:"id,id(1)"`
		Events []eventNew `parquet:"events,id(6),list"`
	}
)

// eventsOf is row id's events: id mod 3 of them, item 10·id + k.
func eventsOf(id int64) []int64 {
	out := make([]int64, id%3)
	for k := range out {
		out[k] = 10*id + int64(k)
	}
	return out
}

// eventsTable is the table's events as its writers store them now.
func eventsTable() *TableSchema {
	elem := format.SchemaElement{Name: "element", FieldID: 7}
	elem.RepetitionType.Set(format.Required)
	elem.NumChildren.Set(3)
	els := listElements("events", 6, format.Optional, elem)
	els = append(els, leafElement("item_id", 8, format.Required, format.Int64),
		leafElement("ts", 9, format.Required, format.Int64), leafElement("kind", 11, format.Required, format.Int32))
	return &TableSchema{IDs: map[string]int32{"id": 1, "events": 6}, Stored: map[int32][]format.SchemaElement{
		1: {leafElement("id", 1, format.Required, format.Int64)}, 6: els}}
}

// TestListMembersByID: a field of a list's elements renamed since a
// file was written is found by its field id there, whichever file comes
// first; one dropped and added again, or added since, is refused naming
// the field, as a struct's member is.
func TestListMembersByID(t *testing.T) {
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name+".parquet") }
	writePromo(t, path("old"), 0, 300, func(id int64) eventRowOld {
		r := eventRowOld{ID: id}
		for _, it := range eventsOf(id) {
			r.Events = append(r.Events, eventOld{Item: it, TS: -it, Kind: 1})
		}
		return r
	})
	writePromo(t, path("new"), 300, 200, func(id int64) eventRowNew {
		r := eventRowNew{ID: id}
		for _, it := range eventsOf(id) {
			r.Events = append(r.Events, eventNew{ItemID: it, TS: -it, Kind: 2})
		}
		return r
	})
	table := eventsTable()
	for _, files := range [][]string{{"old", "new"}, {"new", "old"}} {
		plan := planTable(t, []string{path(files[0]), path(files[1])}, []string{"id", "events.item_id", "events.ts"}, table, nil, "")
		rows := eachUnit(t, plan, func(u Unit, b *column.Batch, _ int) {
			ids := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b.Columns[0].Data))), b.Rows)
			items, ts := &b.Columns[1], &b.Columns[2]
			iv := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(items.Data))), items.Values())
			tv := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(ts.Data))), ts.Values())
			for r, id := range ids {
				want := eventsOf(id)
				got := iv[items.Offsets[r]:items.Offsets[r+1]]
				if len(got) != len(want) || ts.Offsets[r+1]-ts.Offsets[r] != int64(len(want)) {
					t.Fatalf("%s row %d: %d items, %d times; want %d", u.File, id, len(got), ts.Offsets[r+1]-ts.Offsets[r], len(want))
				}
				for k := range want {
					if got[k] != want[k] || tv[ts.Offsets[r]+int64(k)] != -want[k] {
						t.Fatalf("%s row %d: items %v, want %v", u.File, id, got, want)
					}
				}
			}
		})
		if rows != 500 {
			t.Fatalf("%d rows, want 500", rows)
		}
	}
	planTable(t, []string{path("old")}, []string{"events.kind"}, table, ErrSchemaMismatch, "field id 10, the table's column of that name is field id 11")
	ordered := eventsTable()
	ordered.Order = []string{"id", "events"}
	planTable(t, []string{path("new"), path("old")}, nil, ordered, ErrSchemaMismatch, `"events.kind" is field id 10`) // every column
	planTable(t, []string{path("old")}, []string{"events.item"}, table, ErrMissingColumn, `the table has no column "events.item"`)
	added := eventsTable()
	added.Stored[6] = append(added.Stored[6], leafElement("score", 12, format.Optional, format.Double))
	added.Stored[6][2].NumChildren.Set(4)
	added.Nullable = map[int32]bool{12: true}
	planTable(t, []string{path("old")}, []string{"events.score"}, added, ErrMissingColumn, "cannot fill in a field of a list's elements")
}
