package decode

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
)

// structRow has columns inside structs, as event tables written by Spark
// often do: a required struct, an optional one, and a struct in a
// struct, holding required, optional and list columns.
type structRow struct {
	ID   int64 `parquet:"id"`
	User struct {
		Age   int32    `parquet:"age"`
		Score *float32 `parquet:"score,optional"`
		Hist  []int64  `parquet:"hist,list"`
	} `parquet:"user"`
	Ctx *struct {
		Device string `parquet:"device"`
		Geo    struct {
			Lat *float64 `parquet:"lat,optional"`
		} `parquet:"geo"`
		Tags []int32 `parquet:"tags,list,optional"`
	} `parquet:"ctx,optional"`
}

func structRowAt(i int) structRow {
	var r structRow
	r.ID = int64(i)
	r.User.Age = int32(i % 90)
	if i%4 != 0 {
		s := float32(i) / 8
		r.User.Score = &s
	}
	for k := range i % 3 {
		r.User.Hist = append(r.User.Hist, int64(i*10+k))
	}
	if i%5 != 0 {
		r.Ctx = &struct {
			Device string `parquet:"device"`
			Geo    struct {
				Lat *float64 `parquet:"lat,optional"`
			} `parquet:"geo"`
			Tags []int32 `parquet:"tags,list,optional"`
		}{Device: fmt.Sprintf("d%d", i%7)}
		if i%3 != 0 {
			lat := float64(i) / 3
			r.Ctx.Geo.Lat = &lat
		}
		if i%2 == 0 {
			r.Ctx.Tags = []int32{}
			for k := range i % 4 {
				r.Ctx.Tags = append(r.Ctx.Tags, int32(i+k))
			}
		}
	}
	return r
}

// TestStructFields projects columns inside structs by their dotted
// names, nulls of every enclosing struct included, and checks each row.
func TestStructFields(t *testing.T) {
	for _, version := range []int{1, 2} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			rows := make([]structRow, 2500)
			for i := range rows {
				rows[i] = structRowAt(i)
			}
			p := filepath.Join(t.TempDir(), "s.parquet")
			writePG(t, p, rows, "snappy", version)
			all := planPaths(t, PlanOptions{}, p)
			var names []string
			for _, f := range all.Fields {
				names = append(names, f.Name)
			}
			want := []string{"id", "user.age", "user.score", "user.hist", "ctx.device", "ctx.geo.lat", "ctx.tags"}
			if !slices.Equal(names, want) {
				t.Fatalf("every column: %v, want %v", names, want)
			}
			plan := planPaths(t, PlanOptions{Columns: []string{"ctx.geo.lat", "user.hist", "ctx.tags", "user.age", "ctx.device"}}, p)
			checkStructs(t, plan, rows)
		})
	}
}

func checkStructs(t *testing.T, plan *Plan, rows []structRow) {
	t.Helper()
	n := eachUnit(t, plan, func(_ Unit, b *column.Batch, row int) {
		lat, hist, tags, age, dev := &b.Columns[0], &b.Columns[1], &b.Columns[2], &b.Columns[3], &b.Columns[4]
		for r := range b.Rows {
			w := rows[row+r]
			fail := func(col string, got, want any) {
				t.Fatalf("row %d %s: %v, want %v", row+r, col, got, want)
			}
			if age.Valid != nil || age.Int32s()[r] != w.User.Age {
				fail("user.age", age.Int32s()[r], w.User.Age)
			}
			if got := hist.Int64s()[hist.Offsets[r]:hist.Offsets[r+1]]; !slices.Equal(got, w.User.Hist) {
				fail("user.hist", got, w.User.Hist)
			}
			if w.Ctx == nil {
				if lat.Valid[r] != 0 || tags.Valid[r] != 0 || dev.Valid[r] != 0 {
					fail("ctx.*", "a value", "null: ctx is null")
				}
				continue
			}
			if (lat.Valid[r] == 1) != (w.Ctx.Geo.Lat != nil) || w.Ctx.Geo.Lat != nil && lat.Float64s()[r] != *w.Ctx.Geo.Lat {
				fail("ctx.geo.lat", lat.Float64s()[r], w.Ctx.Geo.Lat)
			}
			if got := string(dev.Data[dev.Offsets[r]:dev.Offsets[r+1]]); dev.Valid[r] != 1 || got != w.Ctx.Device {
				fail("ctx.device", got, w.Ctx.Device)
			}
			got := tags.Int32s()[tags.Offsets[r]:tags.Offsets[r+1]]
			if (tags.Valid[r] == 1) != (w.Ctx.Tags != nil) || !slices.Equal(got, w.Ctx.Tags) {
				fail("ctx.tags", got, w.Ctx.Tags)
			}
		}
	})
	if n != len(rows) {
		t.Fatalf("%d rows, want %d", n, len(rows))
	}
}

func TestStructErrors(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.parquet")
	writePG(t, p, []structRow{structRowAt(1)}, "none", 1)
	for _, tc := range []struct {
		col  string
		want error
		msg  string
	}{
		{"user", ErrUnsupported, "project its fields by their dotted names, such as user.age"},
		{"user.nope", ErrMissingColumn, ""},
		{"user.hist.list", ErrUnsupported, `"hist" is a list of values, without fields to name`},
		{"nope.age", ErrMissingColumn, ""},
	} {
		_, err := PlanFiles(context.Background(), []string{p}, PlanOptions{Columns: []string{tc.col}})
		if !errors.Is(err, tc.want) || tc.msg != "" && !containsAll(err.Error(), tc.msg, tc.col) {
			t.Errorf("%s: got %v, want %v naming %q", tc.col, err, tc.want, tc.msg)
		}
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestComparisonPathsRefuse: the comparison paths refuse, by name, the
// columns they would decode otherwise than the production decoder.
func TestComparisonPathsRefuse(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.parquet")
	writePG(t, p, []structRow{structRowAt(1)}, "none", 1)
	plan := planPaths(t, PlanOptions{Columns: []string{"id", "user.age"}}, p)
	for _, path := range []Path{PathArrow, PathParquetGo} {
		if _, err := NewUnitDecoder(path, plan.Fields); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `"user.age"`) {
			t.Errorf("%v: got %v, want ErrUnsupported naming user.age", path, err)
		}
	}
	if d, err := NewUnitDecoder(PathArrow, plan.Fields[:1]); err != nil {
		t.Errorf("arrow, a top-level int64: %v", err)
	} else {
		d.Close()
	}
}
