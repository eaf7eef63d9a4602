package decode

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/format"
)

// Rows of one table over its history, as an Iceberg writer stores them:
// every column with its field id.
type (
	// before "score" (field id 4) was renamed from "points"
	idRowBefore struct {
		ID     int64   `parquet:"id,id(1)"`
		Points float64 `parquet:"points,id(4)"`
		Tags   []int64 `parquet:"tags,list,id(5)"`
	}
	// after the rename
	idRowAfter struct {
		ID    int64   `parquet:"id,id(1)"`
		Score float64 `parquet:"score,id(4)"`
		Tags  []int64 `parquet:"tags,list,id(5)"`
	}
	// "score" dropped, and a new "score" (field id 9) added
	idRowReadded struct {
		ID    int64   `parquet:"id,id(1)"`
		Score float64 `parquet:"score,id(9)"`
		Tags  []int64 `parquet:"tags,list,id(5)"`
	}
	// "extra" (field id 12) and "more" (13) added after the files above
	idRowExtra struct {
		ID    int64    `parquet:"id,id(1)"`
		Score float64  `parquet:"score,id(4)"`
		Tags  []int64  `parquet:"tags,list,id(5)"`
		Extra *float64 `parquet:"extra,id(12),optional"`
		More  []int64  `parquet:"more,id(13),optional,list"`
	}
	// no field ids: plain Parquet
	idRowPlain struct {
		ID    int64   `parquet:"id"`
		Score float64 `parquet:"score"`
		Tags  []int64 `parquet:"tags,list"`
	}
)

// writeIDRows writes n rows from id first, score = id/2, tags = [id],
// with the layout of T.
func writeIDRows[T any](t *testing.T, path string, first, n int, mk func(id int64, score float64, tags []int64) T) {
	rows := make([]T, n)
	for i := range rows {
		id := int64(first + i)
		rows[i] = mk(id, float64(id)/2, []int64{id})
	}
	writePG(t, path, rows, "snappy", 1)
}

// TestFieldIDs: with PlanOptions.Table a column is found by its field
// id in files that store ids, whatever its name there (a rename), files
// without ids through the table's name mapping or else by name; a column
// of that name with another id, or a missing one, is refused with what to
// do.
func TestFieldIDs(t *testing.T) {
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name+".parquet") }
	writeIDRows(t, path("a-before"), 0, 3000, func(id int64, s float64, g []int64) idRowBefore { return idRowBefore{id, s, g} })
	writeIDRows(t, path("b-after"), 3000, 2500, func(id int64, s float64, g []int64) idRowAfter { return idRowAfter{id, s, g} })
	writeIDRows(t, path("c-plain"), 5500, 1000, func(id int64, s float64, g []int64) idRowPlain { return idRowPlain{id, s, g} })
	writeIDRows(t, path("readded"), 0, 100, func(id int64, s float64, g []int64) idRowReadded { return idRowReadded{id, s, g} })
	writeIDRows(t, path("d-extra"), 6500, 700, func(id int64, s float64, g []int64) idRowExtra {
		e := float64(id * 3)
		return idRowExtra{id, s, g, &e, []int64{id, -id}}
	})
	table := &TableSchema{IDs: map[string]int32{"id": 1, "score": 4, "tags": 5}}
	// The table after ALTER TABLE ADD COLUMN extra double, more
	// list<long>: files written before read them as nulls.
	added := &TableSchema{IDs: map[string]int32{"id": 1, "score": 4, "tags": 5, "extra": 12, "more": 13},
		Stored:   map[int32][]format.SchemaElement{12: optionalDouble("extra", 12), 13: optionalLongList("more", 13)},
		Nullable: map[int32]bool{12: true, 13: true},
		Order:    []string{"id", "score", "tags", "extra", "more"}}
	// An imported table (files without ids) whose score was then renamed:
	// its name mapping gives id 4 both names.
	imported := &TableSchema{IDs: map[string]int32{"id": 1, "rating": 4, "tags": 5},
		Mapped: map[string]int32{"id": 1, "score": 4, "rating": 4, "tags": 5}}
	tests := []struct {
		name  string
		files []string
		table *TableSchema
		cols  []string
		rows  int   // rows read, or
		err   error // the error
		says  string
		// fields the plan has, where cols is nil (every column)
		fields []string
	}{
		{"renamed, the old file first", []string{"a-before", "b-after"}, table, []string{"id", "score", "tags"}, 5500, nil, "", nil},
		{"renamed, the new file first", []string{"b-after", "a-before"}, table, []string{"score", "id"}, 5500, nil, "", nil},
		{"a file without field ids, by name", []string{"b-after", "c-plain", "a-before"}, table, []string{"id", "score"}, 6500, nil, "", nil},
		{"every column, renamed", []string{"a-before", "b-after"}, table, nil, 5500, nil, "", []string{"id", "score", "tags"}},
		{"every column, a dropped column left out", []string{"readded"}, table, nil, 100, nil, "", []string{"id", "tags"}},
		{"every column of no table, by name", []string{"a-before"}, nil, nil, 3000, nil, "", []string{"id", "points", "tags"}},
		{"no table, by name as before", []string{"a-before"}, nil, []string{"score"}, 0, ErrMissingColumn, `"score"`, nil},
		{"dropped and added again", []string{"readded"}, table, []string{"id", "score"}, 0, ErrSchemaMismatch,
			"field id 9, the table's column of that name is field id 4", nil},
		{"the old name, which the table no longer has", []string{"a-before"}, table, []string{"id", "points"}, 0,
			ErrMissingColumn, `the table has no column "points"`, nil},
		{"no field ids, by the name mapping", []string{"c-plain"}, imported, []string{"id", "rating", "tags"}, 1000, nil, "", nil},
		{"every column, by the name mapping", []string{"c-plain"}, imported, nil, 1000, nil, "", []string{"id", "rating", "tags"}},
		{"no field ids, a column the mapping leaves out", []string{"c-plain"},
			&TableSchema{IDs: map[string]int32{"id": 1, "score": 4}, Mapped: map[string]int32{"id": 1}}, []string{"id", "score"}, 0,
			ErrMissingColumn, "no column with field id 4", nil},
		{"added after the file was written, of no known type", []string{"b-after"}, &TableSchema{IDs: map[string]int32{"id": 1, "extra": 12}}, []string{"id", "extra"}, 0,
			ErrMissingColumn, "no column with field id 12", nil},
		{"added, the old files first", []string{"a-before", "b-after", "d-extra"}, added, []string{"id", "extra", "more"}, 6200, nil, "", nil},
		{"added, the new file first", []string{"d-extra", "b-after"}, added, []string{"more", "id", "extra"}, 3200, nil, "", nil},
		{"added, the decoder's buffers reused", []string{"d-extra", "readded"}, added, []string{"id", "extra", "more"}, 800, nil, "", nil},
		{"added, no file has it", []string{"b-after"}, added, []string{"extra", "id", "more"}, 2500, nil, "", nil},
		{"added, without field ids by name", []string{"c-plain", "d-extra"}, added, []string{"id", "extra"}, 1700, nil, "", nil},
		{"every column, the added ones in the table's order", []string{"a-before", "d-extra"}, added, nil, 3700, nil, "",
			[]string{"id", "score", "tags", "extra", "more"}},
		{"added with another type than the file's", []string{"d-extra", "a-before"},
			&TableSchema{IDs: map[string]int32{"id": 1, "extra": 12}, Stored: map[int32][]format.SchemaElement{12: optionalLongList("extra", 12)},
				Nullable: map[int32]bool{12: true}},
			[]string{"id", "extra"}, 0, ErrSchemaMismatch, "kind", nil},
		{"dropped and added again, with types", []string{"readded"}, &TableSchema{IDs: table.IDs, Stored: added.Stored, Nullable: added.Nullable}, []string{"id", "score"}, 0,
			ErrSchemaMismatch, "field id 9, the table's column of that name is field id 4", nil},
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
			names := fieldNames(plan)
			if tc.cols == nil && !slices.Equal(names, tc.fields) {
				t.Fatalf("fields %v, want %v", names, tc.fields)
			}
			seen := map[int64]bool{}
			n := eachUnit(t, plan, func(u Unit, b *column.Batch, first int) {
				var ids []int64
				for ci, f := range plan.Fields {
					c := &b.Columns[ci]
					switch f.Name {
					case "id":
						ids = unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(c.Data))), b.Rows)
					case "score", "tags", "points", "rating", "extra", "more":
					default:
						t.Fatalf("field %q", f.Name)
					}
				}
				for ci, f := range plan.Fields {
					c := &b.Columns[ci]
					for r := range b.Rows {
						switch f.Name {
						case "score", "points", "rating":
							got := unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(c.Data))), b.Rows)[r]
							if ids != nil && got != float64(ids[r])/2 {
								t.Fatalf("%s row %d: score %v, want %v", u.File, r, got, float64(ids[r])/2)
							}
						case "extra", "more":
							checkAdded(t, u.File, r, c, ids[r])
						case "tags":
							lo, hi := c.Offsets[r], c.Offsets[r+1]
							v := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(c.Data))), hi)
							if hi-lo != 1 || v[lo] != ids[r] {
								t.Fatalf("%s row %d: tags %v, want [%d]", u.File, r, v[lo:hi], ids[r])
							}
						}
					}
				}
				for _, id := range ids {
					seen[id] = true
				}
			})
			if n != tc.rows || (slices.Contains(names, "id") && len(seen) != tc.rows) {
				t.Fatalf("%d rows read (%d distinct ids), want %d", n, len(seen), tc.rows)
			}
			// A CPU peer checks each unit against its file's footer: a
			// renamed column's path differs in its top-level name only.
			decodeVerified(t, plan)
		})
	}
}

// checkAdded checks row r of column c, extra or more (idRowExtra): null
// with zeros or no values in a file written before they were added,
// else extra = 3·id and more = [id, -id].
func checkAdded(t *testing.T, file string, r int, c *column.Column, id int64) {
	t.Helper()
	valid := c.Valid == nil || c.Valid[r] != 0
	var got []int64
	if c.Kind == column.Fixed {
		got = []int64{int64(unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(c.Data))), c.Len)[r])}
	} else if lo, hi := c.Offsets[r], c.Offsets[r+1]; hi > lo {
		got = unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(c.Data))), hi)[lo:hi]
	}
	want, wantValid := []int64{0}, false
	if c.Kind != column.Fixed {
		want = nil
	}
	if strings.HasSuffix(file, "d-extra.parquet") {
		want, wantValid = []int64{3 * id}, true
		if c.Kind != column.Fixed {
			want = []int64{id, -id}
		}
	}
	if valid != wantValid || !slices.Equal(got, want) {
		t.Fatalf("%s row %d: %s %v (valid %v), want %v (valid %v)", file, r, c.Name, got, valid, want, wantValid)
	}
}
