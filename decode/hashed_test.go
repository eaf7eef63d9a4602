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
	"github.com/lastmile/lastmile/expr"
)

// hashRow holds strings as recommender tables do: a list<string> of
// tags (PLAIN, then dictionary-encoded), an optional list<string> (as
// parquet-go writes strings by default: DELTA_LENGTH_BYTE_ARRAY), a
// top-level string (DELTA_BYTE_ARRAY) and an optional one (dictionary).
type hashRow struct {
	ID      int64    `parquet:"id"`
	Tags    []string `parquet:"tags,list,plain"`
	TagsD   []string `parquet:"tags_dict,list,dict"`
	TagsOpt []string `parquet:"tags_opt,list,optional"`
	Query   string   `parquet:"query,delta"`
	QOpt    *string  `parquet:"query_opt,optional,dict"`
}

func hashTags(i int) []string {
	out := make([]string, i%5)
	for k := range out {
		out[k] = fmt.Sprintf("tag-%d", (i*7+k*13)%97)
	}
	return out
}

func writeHashRows(t testing.TB, path string, n, version int, codec string) {
	rows := make([]hashRow, n)
	for i := range rows {
		rows[i] = hashRow{ID: int64(i), Tags: hashTags(i), TagsD: hashTags(i / 3), Query: fmt.Sprintf("q%d", i*31)}
		if i%4 != 0 {
			rows[i].TagsOpt = hashTags(i + 1)
		}
		if i%3 != 0 {
			s := fmt.Sprintf("query %d", i%50)
			rows[i].QOpt = &s
		}
	}
	writePG(t, path, rows, codec, version)
}

var hashMods = map[string]uint64{"tags": 1000003, "tags_dict": 17, "tags_opt": 1 << 62, "query": 1, "query_opt": 65536}

// hashWant is row i's ids of column name, as hash_mod(s, m) gives them,
// and whether the row is null.
func hashWant(i int, name string) ([]int64, bool) {
	m := hashMods[name]
	ids := func(ss []string) []int64 {
		out := make([]int64, len(ss))
		for k, s := range ss {
			out[k] = int64(expr.HashBytes([]byte(s)) % m)
		}
		return out
	}
	switch name {
	case "tags":
		return ids(hashTags(i)), false
	case "tags_dict":
		return ids(hashTags(i / 3)), false
	case "tags_opt":
		return ids(hashTags(i + 1)), i%4 == 0
	case "query":
		return ids([]string{fmt.Sprintf("q%d", i*31)}), false
	}
	if i%3 == 0 {
		return []int64{0}, true
	}
	return ids([]string{fmt.Sprintf("query %d", i%50)}), false
}

// checkHashedColumn checks column c, whose row r is row rows[r] of the
// file (all rows when rows is nil, counted from first).
func checkHashedColumn(t *testing.T, c *column.Column, first int, rows []int32) {
	t.Helper()
	ids := c.Int64s()
	for r := range c.Len {
		i := first + r
		if rows != nil {
			i = int(rows[r])
		}
		want, null := hashWant(i, c.Name)
		var got []int64
		if c.Kind == column.List {
			got = ids[c.Offsets[r]:c.Offsets[r+1]]
			if null {
				want = nil
			}
		} else {
			got = ids[r : r+1]
		}
		if isNull := c.Valid != nil && c.Valid[r] == 0; isNull != null || !slices.Equal(got, want) {
			t.Fatalf("%s row %d: %v (null %v), want %v (null %v)", c.Name, i, got, isNull, want, null)
		}
	}
}

// TestHashedStrings reads strings and lists of strings as ids in every
// page version, codec and encoding parquet-go writes them in, whole and
// through a selection, and checks each id against hash_mod's.
func TestHashedStrings(t *testing.T) {
	for _, version := range []int{1, 2} {
		for _, codec := range []string{"none", "snappy", "zstd"} {
			t.Run(fmt.Sprintf("v%d/%s", version, codec), func(t *testing.T) {
				t.Parallel()
				p := filepath.Join(t.TempDir(), "h.parquet")
				writeHashRows(t, p, 2000, version, codec)
				plan := planPaths(t, PlanOptions{Hashed: hashMods}, p)
				if len(plan.Fields) != 6 || len(plan.Unreadable) != 0 {
					t.Fatalf("fields %+v, unreadable %+v", plan.Fields, plan.Unreadable)
				}
				for _, f := range plan.Fields[1:] {
					wantKind := column.List
					if strings.HasPrefix(f.Name, "query") {
						wantKind = column.Fixed
					}
					if f.DType != column.Int64 || f.Kind != wantKind || f.Hash != hashMods[f.Name] {
						t.Fatalf("field %s: %v %v hash %d", f.Name, f.Kind, f.DType, f.Hash)
					}
				}
				rows := eachUnit(t, plan, func(_ Unit, b *column.Batch, first int) {
					for ci := 1; ci < len(b.Columns); ci++ {
						checkHashedColumn(t, &b.Columns[ci], first, nil)
					}
				})
				if rows != 2000 {
					t.Fatalf("%d rows", rows)
				}
				checkHashedSelection(t, plan)
			})
		}
	}
}

// checkHashedSelection decodes every third row of each unit's columns
// through DecodeColumn, the late columns' path.
func checkHashedSelection(t *testing.T, plan *Plan) {
	t.Helper()
	d := NewDecoder(plan.Fields)
	defer d.Close()
	first := 0
	for _, u := range plan.Units {
		if err := d.Open(context.Background(), u); err != nil {
			t.Fatal(err)
		}
		var sel, rows []int32
		for r := int32(1); r < int32(u.Rows); r += 3 {
			sel, rows = append(sel, r), append(rows, int32(first)+r)
		}
		for fi := 1; fi < len(plan.Fields); fi++ {
			var c column.Column
			if err := d.DecodeColumn(fi, sel, &c); err != nil {
				t.Fatal(err)
			}
			checkHashedColumn(t, &c, 0, rows)
		}
		first += int(u.Rows)
	}
}

// TestHashedErrors: what cannot be read as ids, or read at all, is an
// error naming the column; projecting every column leaves out, and
// lists, the columns the decoder cannot read.
func TestHashedErrors(t *testing.T) {
	p := filepath.Join(t.TempDir(), "h.parquet")
	writeHashRows(t, p, 100, 1, "none")
	ctx := context.Background()
	cases := []struct {
		desc    string
		opts    PlanOptions
		want    error
		wantMsg string
	}{
		{"a list of strings, not hashed", PlanOptions{Columns: []string{"id", "tags"}}, ErrUnsupported, `column "tags": unsupported: a list of strings, which a batch cannot hold; read it as ids with hashed: {tags: N}`},
		{"an integer hashed", PlanOptions{Columns: []string{"id"}, Hashed: map[string]uint64{"id": 7}}, ErrUnsupported, `column "id": unsupported: hashed reads strings, fixed-size binary and lists of them as ids, and this column is int64`},
		{"a modulus of 0", PlanOptions{Columns: []string{"query"}, Hashed: map[string]uint64{"query": 0}}, nil, `column "query": hashed with a modulus of 0`},
		{"every column, a hashed name missing", PlanOptions{Hashed: map[string]uint64{"tag": 7}}, ErrMissingColumn, `column "tag" (hashed)`},
	}
	for _, tc := range cases {
		_, err := PlanFiles(ctx, []string{p}, tc.opts)
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.wantMsg) {
			t.Errorf("%s: got %v, want %v with %q", tc.desc, err, tc.want, tc.wantMsg)
		}
	}
	plan, err := PlanFiles(ctx, []string{p}, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range plan.Fields {
		names = append(names, f.Name)
	}
	if !slices.Equal(names, []string{"id", "query", "query_opt"}) {
		t.Fatalf("every column: %v", names)
	}
	var un []string
	for _, u := range plan.Unreadable {
		un = append(un, u.Name)
		if !strings.Contains(u.Why, "hashed: {"+u.Name+": N}") {
			t.Errorf("unreadable %s: %q does not say how to read it", u.Name, u.Why)
		}
	}
	if !slices.Equal(un, []string{"tags", "tags_dict", "tags_opt"}) {
		t.Fatalf("unreadable %v", un)
	}
}

// TestHashedFixedBinary: FIXED_LEN_BYTE_ARRAY columns (UUIDs, digests),
// PLAIN and dictionary-encoded, alone and in a list, read as the ids of
// their bytes, as strings of those bytes would.
func TestHashedFixedBinary(t *testing.T) {
	type row struct {
		U  [16]byte   `parquet:"u"`
		UD [16]byte   `parquet:"ud,dict"`
		UL [][16]byte `parquet:"ul,list"`
	}
	at := func(i int) (b [16]byte) {
		for k := range b {
			b[k] = byte(i*7 + k*13)
		}
		return b
	}
	rows := make([]row, 3000)
	for i := range rows {
		rows[i] = row{U: at(i), UD: at(i % 40)}
		for k := range i % 3 {
			rows[i].UL = append(rows[i].UL, at(i+k))
		}
	}
	for _, version := range []int{1, 2} {
		p := filepath.Join(t.TempDir(), "u.parquet")
		writePG(t, p, rows, "snappy", version)
		mods := map[string]uint64{"u": 1000, "ud": 77, "ul": 1 << 40}
		plan := planPaths(t, PlanOptions{Hashed: mods}, p)
		id := func(b [16]byte, m uint64) int64 { return int64(expr.HashBytes(b[:]) % m) }
		eachUnit(t, plan, func(_ Unit, b *column.Batch, first int) {
			for r := range b.Rows {
				i := first + r
				ul := b.Columns[2].Int64s()[b.Columns[2].Offsets[r]:b.Columns[2].Offsets[r+1]]
				var want []int64
				for _, x := range rows[i].UL {
					want = append(want, id(x, mods["ul"]))
				}
				if b.Columns[0].Int64s()[r] != id(rows[i].U, 1000) || b.Columns[1].Int64s()[r] != id(rows[i].UD, 77) || !slices.Equal(ul, want) {
					t.Fatalf("v%d row %d: u %d ud %d ul %v", version, i, b.Columns[0].Int64s()[r], b.Columns[1].Int64s()[r], ul)
				}
			}
		})
	}
	// Not hashed, fixed-size binary is still not read.
	p := filepath.Join(t.TempDir(), "u.parquet")
	writePG(t, p, rows[:10], "none", 1)
	if _, err := PlanFiles(context.Background(), []string{p}, PlanOptions{Columns: []string{"u"}}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("u not hashed: %v, want ErrUnsupported", err)
	}
}
