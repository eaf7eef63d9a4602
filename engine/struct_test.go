package engine_test

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// eventRow keeps its features in structs, as event tables often do.
type eventRow struct {
	RowID int64 `parquet:"row_id"`
	User  struct {
		Age int64 `parquet:"age"`
	} `parquet:"user"`
	Ctx *struct {
		Geo struct {
			Lat *float64 `parquet:"lat,optional"`
		} `parquet:"geo"`
	} `parquet:"ctx,optional"`
}

// TestStructColumns filters and maps on columns inside structs, named by
// their paths, and hands them to the trainer under those names.
func TestStructColumns(t *testing.T) {
	dir := t.TempDir()
	rows := make([]eventRow, 3000)
	var want []int64
	for i := range rows {
		rows[i].RowID = int64(i)
		rows[i].User.Age = int64(i % 70)
		if i%4 != 0 {
			rows[i].Ctx = &struct {
				Geo struct {
					Lat *float64 `parquet:"lat,optional"`
				} `parquet:"geo"`
			}{}
			if i%3 != 0 {
				lat := float64(i%90) - 45
				rows[i].Ctx.Geo.Lat = &lat
			}
		}
		if rows[i].User.Age >= 30 && rows[i].Ctx != nil && rows[i].Ctx.Geo.Lat != nil {
			want = append(want, int64(i))
		}
	}
	path := filepath.Join(dir, "events.parquet")
	if err := parquet.WriteFile(path, rows, parquet.MaxRowsPerRowGroup(1000)); err != nil {
		t.Fatal(err)
	}
	got := runDense(t, fmt.Sprintf(`
inputs: [%s]
columns: [row_id, user.age, ctx.geo.lat]
batch: {size: 64, last: keep}
ring: {dir: %s, name: structs}
pipeline:
  - filter: "user.age >= 30 and not is_null(ctx.geo.lat)"
  - map: {lat_x2: "ctx.geo.lat * 2"}
`, path, dir), dir, "row_id", "user.age", "ctx.geo.lat")
	if !slices.Equal(got["row_id"], want) {
		t.Fatalf("kept %d rows, want %d", len(got["row_id"]), len(want))
	}
	for k, id := range got["row_id"] {
		r := rows[id]
		if got["user.age"][k] != r.User.Age || math.Float64frombits(uint64(got["ctx.geo.lat"][k])) != *r.Ctx.Geo.Lat {
			t.Fatalf("row %d: user.age %d, ctx.geo.lat %v", id, got["user.age"][k], math.Float64frombits(uint64(got["ctx.geo.lat"][k])))
		}
	}
}
