package decode

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
)

// TestPlanOf: fields another host planned are taken as they are when a
// decoder can take them, and refused, naming the field, when not.
func TestPlanOf(t *testing.T) {
	good := Field{Name: "x", Kind: column.Fixed, DType: column.Int64, Path: []string{"x"}, Physical: 2, MaxDef: 1}
	tests := []struct {
		name string
		edit func(f *Field)
		says string // "" for accepted
	}{
		{"as planned", func(*Field) {}, ""},
		{"promoted", func(f *Field) { f.StoredPhysical = 1 }, ""},
		{"absent", func(f *Field) { f.Absent, f.Leaf = true, -1 }, ""},
		{"no name", func(f *Field) { f.Name = "" }, "name"},
		{"no path", func(f *Field) { f.Path = nil }, "path"},
		{"a kind of no plan", func(f *Field) { f.Kind = 7 }, "kind"},
		{"no dtype", func(f *Field) { f.DType = column.Invalid }, "dtype"},
		{"a dtype past the last", func(f *Field) { f.DType = 200 }, "dtype"},
		{"levels past the deepest schema", func(f *Field) { f.MaxRep = 1000 }, "levels"},
		{"a row level past the deepest", func(f *Field) { f.RowDef = 2 }, "levels"},
		{"no parquet type", func(f *Field) { f.Physical = 9 }, "parquet type"},
		{"stored as a type no promotion has", func(f *Field) { f.StoredPhysical = 0x7f }, "stored as"},
		{"a decimal scale past the widest", func(f *Field) { f.Scale = 99 }, "scale"},
		{"a leaf below -1", func(f *Field) { f.Leaf = -5 }, "leaf"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := good
			f.Path = append([]string(nil), good.Path...)
			tc.edit(&f)
			_, err := PlanOf([]Field{good, f}, nil, nil)
			switch {
			case tc.says == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "field 1")):
				t.Fatalf("error %v, want one naming field 1 and saying %q", err, tc.says)
			}
		})
	}
	if _, err := PlanOf(nil, nil, nil); err == nil {
		t.Error("a plan of no columns accepted")
	}
}

// FuzzPlanOf: whatever fields a requester sends, a peer's decoder made
// of those PlanOf accepts, verifying units against their files, returns
// rows or an error, and never panics.
func FuzzPlanOf(f *testing.F) {
	plans := fuzzSeeds(f)
	for _, p := range plans {
		b, err := json.Marshal(p.Fields)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	units := plans[0].Units
	f.Fuzz(func(t *testing.T, b []byte) {
		var fields []Field
		if json.Unmarshal(b, &fields) != nil || len(fields) != len(units[0].Chunks) {
			return
		}
		plan, err := PlanOf(fields, nil, nil)
		if err != nil {
			return
		}
		d := plan.NewDecoder()
		defer d.Close()
		d.VerifyUnits()
		var out column.Batch
		for _, u := range units {
			if err := d.Decode(context.Background(), u, &out); err == nil && int64(out.Rows) != u.Rows {
				t.Fatalf("%d rows of a unit of %d", out.Rows, u.Rows)
			}
		}
	})
}
