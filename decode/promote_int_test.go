package decode

import (
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/format"
)

// TestIntWidenedBesideTimestamps: a table's long column (promoted from
// int) whose old files store a plain INT32 and whose newer files some
// writer annotated as TIMESTAMP(MICROS) does not plan: the plan's field
// would take the timestamps' unit, and the decoder would read the old
// ints as a date's days. Planning the files together is refused, in
// either order, naming both; each alone reads its own numbers.
func TestIntWidenedBesideTimestamps(t *testing.T) {
	type (
		oldRow struct {
			ID int64 `parquet:"id,id(1)"`
			N  int32 `parquet:"n,id(2)"`
		}
		newRow struct {
			ID int64 `parquet:"id,id(1)"`
			N  int64 `parquet:"n,timestamp(microsecond),id(2)"`
		}
	)
	table := &TableSchema{IDs: map[string]int32{"id": 1, "n": 2}, Stored: map[int32][]format.SchemaElement{
		1: {leafElement("id", 1, format.Required, format.Int64)},
		2: {leafElement("n", 2, format.Required, format.Int64)}, // a long, no annotation
	}}
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name+".parquet") }
	writePromo(t, path("old"), 0, 10, func(id int64) oldRow { return oldRow{id, int32(id + 7)} })
	writePromo(t, path("new"), 10, 10, func(id int64) newRow { return newRow{id, id + 7} })
	for _, order := range [][]string{{"old", "new"}, {"new", "old"}} {
		planTable(t, []string{path(order[0]), path(order[1])}, nil, table, ErrSchemaMismatch, "an int widened to a long vs timestamps of microseconds")
	}
	for _, name := range []string{"old", "new"} {
		eachUnit(t, planTable(t, []string{path(name)}, nil, table, nil, ""), func(u Unit, b *column.Batch, _ int) {
			ids := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b.Columns[0].Data))), b.Rows)
			ns := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b.Columns[1].Data))), b.Rows)
			for r, id := range ids {
				if ns[r] != id+7 {
					t.Fatalf("%s row %d: n = %d, want %d", u.File, r, ns[r], id+7)
				}
			}
		})
	}
}
