package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/expr"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
	"github.com/parquet-go/parquet-go"
)

// catRow is a table with string features: a list<string> of the
// categories a user clicked, and the same query string twice (one is
// hashed at decode, the other in the pipeline), beside a map the job
// never reads.
type catRow struct {
	RowID  int64              `parquet:"row_id"`
	Cats   []string           `parquet:"cats,list,dict"`
	QueryA string             `parquet:"query_a"`
	QueryB string             `parquet:"query_b"`
	Extra  map[string]float32 `parquet:"extra"`
}

func rowCats(i int) []string {
	out := make([]string, i%4)
	for k := range out {
		out[k] = fmt.Sprintf("cat/%d", (i+k*11)%37)
	}
	return out
}

// TestHashedColumns reads a list<string> and a string as ids through
// a pipeline: the ids are hash_mod's, the same as a map op's on the
// same strings, rows filtered on the list's length come out whole, and
// the map column the job never names stays unread.
func TestHashedColumns(t *testing.T) {
	dir := t.TempDir()
	rows := make([]catRow, 3000)
	for i := range rows {
		q := fmt.Sprintf("query %d", i%101)
		rows[i] = catRow{RowID: int64(i), Cats: rowCats(i), QueryA: q, QueryB: q, Extra: map[string]float32{"x": 1}}
	}
	path := filepath.Join(dir, "clicks.parquet")
	if err := parquet.WriteFile(path, rows, parquet.MaxRowsPerRowGroup(1000)); err != nil {
		t.Fatal(err)
	}
	got := runRows(t, fmt.Sprintf(`
inputs: [%s]
hashed: {cats: 1000003, query_a: 4096}
batch: {size: 64, last: keep}
ring: {dir: %s, name: hashed}
pipeline:
  - filter: "len(cats) >= 2"
  - map: {query_b: "hash_mod(query_b, 4096)"}
  - select: [row_id, cats, query_a, query_b]
`, path, dir), dir)
	var want []int64
	for i := range rows {
		if len(rows[i].Cats) >= 2 {
			want = append(want, int64(i))
		}
	}
	var ids []int64
	for _, r := range got["row_id"] {
		ids = append(ids, r[0])
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("kept %d rows, want %d", len(ids), len(want))
	}
	for k, id := range ids {
		var cats []int64
		for _, s := range rowCats(int(id)) {
			cats = append(cats, int64(expr.HashBytes([]byte(s))%1000003))
		}
		if !slices.Equal(got["cats"][k], cats) {
			t.Fatalf("row %d: cats %v, want %v", id, got["cats"][k], cats)
		}
		if a, b := got["query_a"][k][0], got["query_b"][k][0]; a != b || a != int64(expr.HashBytes([]byte(rows[id].QueryA))%4096) {
			t.Fatalf("row %d: query_a %d (hashed at decode), query_b %d (hash_mod in a map)", id, a, b)
		}
	}
}

// TestHashedColumnErrors: the columns a job cannot read are errors
// that say why, where the spec names them.
func TestHashedColumnErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "clicks.parquet")
	if err := parquet.WriteFile(path, []catRow{{RowID: 1, Cats: []string{"a"}}}); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, extra, want string }{
		{"a list of strings in a filter", "pipeline:\n  - filter: \"len(cats) > 1\"\n",
			`pipeline[0].filter: column "cats" cannot be read: a list of strings, which a batch cannot hold; read it as ids with hashed: {cats: N}`},
		{"a map in columns", "columns: [row_id, extra]\n", `columns[1]: column "extra" is a struct, a map or a list of structs: name its members, extra.key, extra.value`},
		{"a map's string keys", "columns: [row_id, extra.key]\n", `columns[1]: column "extra.key" cannot be read: a list of strings, which a batch cannot hold; read it as ids with hashed: {extra.key: N}`},
		{"an integer hashed", "hashed: {row_id: 5}\n", `column "row_id": unsupported: hashed reads strings, fixed-size binary and lists of them as ids, and this column is int64`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := fmt.Sprintf("inputs: [%s]\nbatch: {size: 8}\nring: {dir: %s}\n%s", path, dir, tc.extra)
			job, err := spec.Parse("job.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			err = engine.Check(context.Background(), job, nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// runRows runs the job src and returns every int64 column of its ring,
// row by row: a dense column's row is its value, a list's its values.
func runRows(t testing.TB, src, dir string) map[string][][]int64 {
	t.Helper()
	_, out := runRowsStats(t, src, dir)
	return out
}

// runRowsStats is runRows that returns the run's Stats too.
func runRowsStats(t testing.TB, src, dir string) (engine.Stats, map[string][][]int64) {
	t.Helper()
	out := map[string][][]int64{}
	st := runConsumed(t, src, func(ctx context.Context, ring string) error { return readRows(ctx, dir, ring, out) })
	return st, out
}

func readRows(ctx context.Context, dir, ring string, out map[string][][]int64) error {
	i64 := func(b []byte) []int64 { return unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8) }
	return eachBatch(ctx, dir, ring, func(b *shm.Batch) {
		for _, ts := range b.Tensors {
			switch ts.Role {
			case shm.RoleDense:
				for _, v := range i64(ts.Data) {
					out[ts.Name] = append(out[ts.Name], []int64{v})
				}
			case shm.RoleValues:
				vals, offs := i64(ts.Data), i64(b.Tensor(ts.Name, shm.RoleOffsets).Data)
				for r := range b.Rows {
					out[ts.Name] = append(out[ts.Name], slices.Clone(vals[offs[r]:offs[r+1]]))
				}
			}
		}
	})
}

// TestMapAndStructLists: a map and a list of structs reach the trainer
// as lists of their members, lined up row by row and element by element,
// through a filter on one of them.
func TestMapAndStructLists(t *testing.T) {
	dir := t.TempDir()
	type click struct {
		Item  int64 `parquet:"item"`
		Dwell int64 `parquet:"dwell"`
	}
	type row struct {
		RowID  int64           `parquet:"row_id"`
		Scores map[int64]int64 `parquet:"scores"`
		Hist   []click         `parquet:"hist,list"`
	}
	rows := make([]row, 2000)
	for i := range rows {
		rows[i] = row{RowID: int64(i), Scores: map[int64]int64{}}
		for k := range i % 5 {
			rows[i].Scores[int64(i*10+k)] = int64(k * 3)
			rows[i].Hist = append(rows[i].Hist, click{Item: int64(i*100 + k), Dwell: int64(k)})
		}
	}
	path := filepath.Join(dir, "nested.parquet")
	if err := parquet.WriteFile(path, rows, parquet.MaxRowsPerRowGroup(700)); err != nil {
		t.Fatal(err)
	}
	got := runRows(t, fmt.Sprintf(`
inputs: [%s]
batch: {size: 64, last: keep}
ring: {dir: %s, name: nested}
pipeline:
  - filter: "len(hist.item) >= 3"
`, path, dir), dir)
	n := 0
	for k, r := range got["row_id"] {
		i := int(r[0])
		want := rows[i]
		if len(want.Hist) < 3 {
			t.Fatalf("row %d kept with %d clicks", i, len(want.Hist))
		}
		n++
		keys, vals := got["scores.key"][k], got["scores.value"][k]
		if len(keys) != len(want.Scores) || len(vals) != len(keys) {
			t.Fatalf("row %d: %d keys, %d values, want %d", i, len(keys), len(vals), len(want.Scores))
		}
		for j, key := range keys {
			if want.Scores[key] != vals[j] {
				t.Fatalf("row %d: scores %d → %d, want %d", i, key, vals[j], want.Scores[key])
			}
		}
		for j, c := range want.Hist {
			if got["hist.item"][k][j] != c.Item || got["hist.dwell"][k][j] != c.Dwell {
				t.Fatalf("row %d: click %d is (%d, %d), want %+v", i, j, got["hist.item"][k][j], got["hist.dwell"][k][j], c)
			}
		}
	}
	if n != 800 {
		t.Fatalf("%d rows kept, want 800", n)
	}
	// The map's keys as a jagged group's first key, its values beside it
	// as a ragged field: lined up row by row, as a weighted KJT needs.
	got = runRows(t, fmt.Sprintf(`
inputs: [%s]
batch: {size: 64, last: keep}
ring: {dir: %s, name: weighted}
pipeline:
  - jagged: {output: sparse, keys: [{column: scores.key, key: scores}, hist.item]}
  - select: [row_id, sparse, scores.value]
`, path, dir), dir)
	if len(got["row_id"]) != len(rows) {
		t.Fatalf("%d rows, want %d", len(got["row_id"]), len(rows))
	}
	for k, r := range got["row_id"] {
		ids, vals := got["sparse"][k], got["scores.value"][k] // the group's key 0, row k
		if len(ids) != len(vals) || len(ids) != len(rows[r[0]].Scores) {
			t.Fatalf("row %d: %d ids, %d weights, want %d", r[0], len(ids), len(vals), len(rows[r[0]].Scores))
		}
		for j, id := range ids {
			if rows[r[0]].Scores[id] != vals[j] {
				t.Fatalf("row %d: id %d weighs %d, want %d", r[0], id, vals[j], rows[r[0]].Scores[id])
			}
		}
	}
	// Cut to 2 per row, the weights with them (weights:).
	got = runRows(t, fmt.Sprintf(`
inputs: [%s]
batch: {size: 64, last: keep}
ring: {dir: %s, name: weighted-cut}
pipeline:
  - jagged: {output: sparse, keys: [{column: scores.key, key: scores, max_length: 2, weights: scores.value}]}
  - select: [row_id, sparse, scores.value]
`, path, dir), dir)
	cut := 0
	for k, r := range got["row_id"] {
		ids, vals := got["sparse"][k], got["scores.value"][k]
		if len(ids) != len(vals) || len(ids) != min(2, len(rows[r[0]].Scores)) {
			t.Fatalf("row %d: %d ids, %d weights, want %d", r[0], len(ids), len(vals), min(2, len(rows[r[0]].Scores)))
		}
		for j, id := range ids {
			if rows[r[0]].Scores[id] != vals[j] {
				t.Fatalf("row %d: id %d weighs %d, want %d", r[0], id, vals[j], rows[r[0]].Scores[id])
			}
		}
		if len(rows[r[0]].Scores) > 2 {
			cut++
		}
	}
	if cut == 0 {
		t.Fatal("no row had more than 2 scores to cut")
	}
}
