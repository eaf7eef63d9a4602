package decode

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/expr"
)

// nestRow has the nested shapes recommender tables use: an id-score map
// (map<int64, float>), a map with string keys, and a list of structs
// (each click an item and a dwell time), optional lists included.
type nestRow struct {
	ID     int64              `parquet:"id"`
	Scores map[int64]float32  `parquet:"scores"`
	Tags   map[string]float64 `parquet:"tags"`
	Hist   []nestClick        `parquet:"hist,list"`
	Opt    []nestClick        `parquet:"opt,list,optional"`
}

type nestClick struct {
	Item  int64   `parquet:"item"`
	Dwell float32 `parquet:"dwell"`
}

func nestAt(i int) nestRow {
	r := nestRow{ID: int64(i), Scores: map[int64]float32{}, Tags: map[string]float64{}}
	for k := range i % 4 {
		r.Scores[int64(i*10+k)] = float32(k) / 2
		r.Tags[fmt.Sprintf("t%d", (i+k)%13)] = float64(k)
		r.Hist = append(r.Hist, nestClick{Item: int64(i*100 + k), Dwell: float32(k)})
	}
	if i%3 != 0 {
		r.Opt = []nestClick{{Item: int64(-i), Dwell: 1}}
	}
	return r
}

// TestNestedLists reads maps as their keys and values and lists of
// structs as one list per field, lined up row by row and element by
// element, whole and through a selection; a string key only as ids.
func TestNestedLists(t *testing.T) {
	for _, version := range []int{1, 2} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "n.parquet")
			rows := make([]nestRow, 3000)
			for i := range rows {
				rows[i] = nestAt(i)
			}
			writePG(t, p, rows, "snappy", version)
			plan := planPaths(t, PlanOptions{Hashed: map[string]uint64{"tags.key": 1000}}, p)
			var names []string
			for _, f := range plan.Fields {
				names = append(names, f.Name)
				if f.Name != "id" && f.Kind != column.List {
					t.Fatalf("%s: kind %v, want a list", f.Name, f.Kind)
				}
			}
			want := []string{"id", "scores.key", "scores.value", "tags.key", "tags.value", "hist.item", "hist.dwell", "opt.item", "opt.dwell"}
			if !slices.Equal(names, want) || len(plan.Unreadable) != 0 {
				t.Fatalf("every column: %v (unreadable %v), want %v", names, plan.Unreadable, want)
			}
			eachUnit(t, plan, func(u Unit, b *column.Batch, first int) {
				for r := range b.Rows {
					checkNestedRow(t, b, r, first+r)
				}
				checkSelected(t, plan, u, b)
			})
		})
	}
}

// checkNestedRow checks batch row r against file row i.
func checkNestedRow(t *testing.T, b *column.Batch, r, i int) {
	t.Helper()
	want := nestAt(i)
	list := func(name string) (*column.Column, int64, int64) {
		for k := range b.Columns {
			if c := &b.Columns[k]; c.Name == name {
				return c, c.Offsets[r], c.Offsets[r+1]
			}
		}
		t.Fatalf("no column %s", name)
		return nil, 0, 0
	}
	// Maps: pairs in the file's order, which parquet-go sorts by key.
	keys, lo, hi := list("scores.key")
	vals, _, _ := list("scores.value")
	var sk []int64
	for k := range want.Scores {
		sk = append(sk, k)
	}
	slices.Sort(sk)
	if got := keys.Int64s()[lo:hi]; !slices.Equal(got, sk) {
		t.Fatalf("row %d: scores.key %v, want %v", i, got, sk)
	}
	for j, k := range sk {
		if vals.Float32s()[lo+int64(j)] != want.Scores[k] {
			t.Fatalf("row %d: scores.value[%d] = %v, want %v", i, j, vals.Float32s()[lo+int64(j)], want.Scores[k])
		}
	}
	tk, lo, hi := list("tags.key")
	var tags []string
	for k := range want.Tags {
		tags = append(tags, k)
	}
	sort.Strings(tags)
	for j, s := range tags {
		if got := tk.Int64s()[lo+int64(j)]; got != int64(expr.HashBytes([]byte(s))%1000) || hi-lo != int64(len(tags)) {
			t.Fatalf("row %d: tags.key[%d] = %d, want the id of %q", i, j, got, s)
		}
	}
	for _, name := range []string{"hist", "opt"} {
		clicks := want.Hist
		if name == "opt" {
			clicks = want.Opt
		}
		items, lo, hi := list(name + ".item")
		dwell, _, _ := list(name + ".dwell")
		if hi-lo != int64(len(clicks)) {
			t.Fatalf("row %d: %s has %d elements, want %d", i, name, hi-lo, len(clicks))
		}
		if null := items.Valid != nil && items.Valid[r] == 0; null != (name == "opt" && clicks == nil) {
			t.Fatalf("row %d: %s null %v", i, name, null)
		}
		for j, c := range clicks {
			if items.Int64s()[lo+int64(j)] != c.Item || dwell.Float32s()[lo+int64(j)] != c.Dwell {
				t.Fatalf("row %d: %s[%d] = (%d, %v), want %+v", i, name, j, items.Int64s()[lo+int64(j)], dwell.Float32s()[lo+int64(j)], c)
			}
		}
	}
}

// TestNestedErrors: a map or a list of structs named whole is an error
// that says how to name its fields; a missing field is missing.
func TestNestedErrors(t *testing.T) {
	p := filepath.Join(t.TempDir(), "n.parquet")
	writePG(t, p, []nestRow{nestAt(1)}, "none", 1)
	for _, tc := range []struct {
		col  string
		want error
		msg  string
	}{
		{"scores", ErrUnsupported, "a map; project its keys and values as two lists, scores.key and scores.value"},
		{"hist", ErrUnsupported, "a list of structs; project its fields as hist.FIELD (item, dwell)"},
		{"hist.nope", ErrMissingColumn, `column "hist.nope"`},
		{"tags.key", ErrUnsupported, "read it as ids with hashed: {tags.key: N}"},
	} {
		_, err := PlanFiles(context.Background(), []string{p}, PlanOptions{Columns: []string{"id", tc.col}})
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v, want %v with %q", tc.col, err, tc.want, tc.msg)
		}
	}
}

// checkSelected decodes every fifth row of u's columns through
// DecodeColumn and compares them with those rows of whole, u decoded
// whole.
func checkSelected(t *testing.T, plan *Plan, u Unit, whole *column.Batch) {
	t.Helper()
	d := NewDecoder(plan.Fields)
	defer d.Close()
	if err := d.Open(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	var sel []int32
	for r := int32(2); r < int32(u.Rows); r += 5 {
		sel = append(sel, r)
	}
	for fi := range plan.Fields {
		var c column.Column
		if err := d.DecodeColumn(fi, sel, &c); err != nil {
			t.Fatal(err)
		}
		w := &whole.Columns[fi]
		for k, r := range sel {
			if c.Kind != column.Fixed && !slices.Equal(c.Row(k), w.Row(int(r))) {
				t.Fatalf("%s: selected row %d differs from the whole decode", c.Name, r)
			}
			if c.Valid != nil && w.Valid != nil && c.Valid[k] != w.Valid[r] {
				t.Fatalf("%s: selected row %d's validity differs", c.Name, r)
			}
		}
	}
}
