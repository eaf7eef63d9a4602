package ops_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/ops"
)

type inRow struct {
	ID  int64 `parquet:"id"`
	Key int64 `parquet:"key"`
}

type sideRow struct {
	Key  int64 `parquet:"key"`
	Feat int64 `parquet:"feat"`
}

const nBuckets = 8

// bucketedData writes, under dir, an input of 4000 rows (keys 0..1999,
// twice each) and a side table of the even keys 0..3998, both laid out as
// bucket=B directories of bucket[8](key), two files per input bucket.
// It returns the input's files.
func bucketedData(t testing.TB, dir string) []string {
	t.Helper()
	in := make([][]inRow, nBuckets)
	for id := range int64(4000) {
		k := id % 2000
		b := iceberg.BucketInt(nBuckets, k)
		in[b] = append(in[b], inRow{ID: id, Key: k})
	}
	side := make([][]sideRow, nBuckets)
	for k := int64(0); k < 4000; k += 2 {
		b := iceberg.BucketInt(nBuckets, k)
		side[b] = append(side[b], sideRow{Key: k, Feat: k * 10})
	}
	var files []string
	for b := range nBuckets {
		half := len(in[b]) / 2
		for i, rows := range [][]inRow{in[b][:half], in[b][half:]} {
			p := filepath.Join(dir, "in", fmt.Sprintf("bucket=%d", b), fmt.Sprintf("part-%d.parquet", i))
			writeTable(t, p, rows)
			files = append(files, p)
		}
		writeTable(t, filepath.Join(dir, "side", fmt.Sprintf("bucket=%d", b), "part-0.parquet"), side[b])
	}
	return files
}

// joinAll runs p over every unit of the input files on workers
// goroutines, units in a shuffled order, as the engine does (BeginUnit,
// Select, Apply, EndUnit), and returns feat by id (-1: null).
func joinAll(t testing.TB, p *ops.Program, files []string, workers int) map[int64]int64 {
	t.Helper()
	ctx := context.Background()
	plan, err := decode.PlanFiles(ctx, files, decode.PlanOptions{Columns: []string{"id", "key"}})
	if err != nil {
		t.Fatal(err)
	}
	order := rand.New(rand.NewPCG(1, 2)).Perm(len(plan.Units))
	var mu sync.Mutex
	got := map[int64]int64{}
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dec := plan.NewDecoder()
			defer dec.Close()
			st := p.NewState()
			for i := w; i < len(order); i += workers {
				u := plan.Units[order[i]]
				var b column.Batch
				if err := dec.Decode(ctx, u, &b); err != nil {
					errs[w] = err
					return
				}
				st.BeginUnit(ctx, u.File)
				out, err := runErr(p, st, &b)
				st.EndUnit()
				if err != nil {
					errs[w] = err
					return
				}
				ids, feats := out.Col("id").Int64s(), out.Col("feat")
				mu.Lock()
				for j, id := range ids[:out.Rows] {
					got[id] = -1
					if feats.Valid == nil || feats.Valid[j] == 1 {
						got[id] = feats.Int64s()[j]
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return got
}

func inputFields(t testing.TB, files []string) []decode.Field {
	t.Helper()
	plan, err := decode.PlanFiles(context.Background(), files, decode.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return plan.Fields
}

func TestBucketJoin(t *testing.T) {
	dir := t.TempDir()
	files := bucketedData(t, dir)
	fields := inputFields(t, files)
	ctx := context.Background()
	whole, err := ops.Compile(ctx, job(t, dir, "- join: {kind: left, table: side, on: key, columns: [feat]}"), fields, ops.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if len(whole.BucketStats()) != 0 {
		t.Fatal("a join without buckets ran as a bucket join")
	}
	if whole.SideMemory() <= 0 {
		t.Errorf("a loaded whole table holds %d bytes (SideMemory)", whole.SideMemory())
	}
	want := joinAll(t, whole, files, 1)
	if len(want) != 4000 || want[10] != 100 || want[11] != -1 {
		t.Fatalf("whole-table join: %d rows, feat(10)=%d, feat(11)=%d", len(want), want[10], want[11])
	}
	// A budget of about two of the eight buckets: workers wait for each
	// other's buckets and evict them.
	const budget = 24 << 10
	bucketed, err := ops.Compile(ctx, job(t, dir, fmt.Sprintf("- join: {kind: left, table: side, on: key, columns: [feat], buckets: %d, max_memory: %d}", nBuckets, budget)), fields, ops.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if n := bucketed.SideMemory(); n != 0 {
		t.Errorf("a bucket join holds %d bytes before any unit (SideMemory), want 0", n)
	}
	got := joinAll(t, bucketed, files, 4)
	if len(got) != len(want) {
		t.Fatalf("bucket join: %d rows, want %d", len(got), len(want))
	}
	for id, f := range want {
		if got[id] != f {
			t.Fatalf("id %d: bucket join feat %d, whole-table join %d", id, got[id], f)
		}
	}
	st := bucketed.BucketStats()[0]
	t.Logf("bucket join: %+v", st)
	switch {
	case st.Buckets != nBuckets || st.Budget != budget:
		t.Errorf("stats %+v", st)
	case st.Loads < nBuckets:
		t.Errorf("%d loads for %d buckets", st.Loads, nBuckets)
	case st.Largest <= 0 || st.Peak < st.Largest:
		t.Errorf("peak %d, largest bucket %d", st.Peak, st.Largest)
	case st.Peak > st.Budget+st.Largest:
		t.Errorf("peak %d bytes over budget %d plus the largest bucket %d", st.Peak, st.Budget, st.Largest)
	case st.Held > st.Budget:
		t.Errorf("%d bytes still held, over the budget %d", st.Held, st.Budget)
	case bucketed.SideMemory() != st.Held:
		t.Errorf("SideMemory %d, want the buckets held, %d", bucketed.SideMemory(), st.Held)
	}
	// The same join loading the table whole does not fit that budget: a
	// clear error before any row is read.
	_, err = ops.Compile(ctx, job(t, dir, fmt.Sprintf("- join: {kind: left, table: side, on: key, columns: [feat], max_memory: %d}", budget)), fields, ops.Env{})
	if err == nil || !strings.Contains(err.Error(), "over max_memory") {
		t.Errorf("whole table over its budget: %v", err)
	}
}

func TestBucketJoinSemi(t *testing.T) {
	dir := t.TempDir()
	files := bucketedData(t, dir)
	fields := inputFields(t, files)
	p, err := ops.Compile(context.Background(), job(t, dir, "- join: {kind: semi, table: side, on: key, buckets: 8, max_memory: 16KiB}"), fields, ops.Env{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := decode.PlanFiles(context.Background(), files, decode.PlanOptions{Columns: []string{"id", "key"}})
	if err != nil {
		t.Fatal(err)
	}
	st, dec := p.NewState(), plan.NewDecoder()
	defer dec.Close()
	kept := 0
	for _, u := range plan.Units {
		var b column.Batch
		if err := dec.Decode(context.Background(), u, &b); err != nil {
			t.Fatal(err)
		}
		st.BeginUnit(context.Background(), u.File)
		sel, err := st.Select(project(&b, p.Early()), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range sel {
			if k := b.Col("key").Int64s()[r]; k%2 != 0 {
				t.Fatalf("semi join kept odd key %d", k)
			}
		}
		kept += len(sel)
		st.EndUnit()
	}
	if kept != 2000 {
		t.Errorf("semi join kept %d rows, want 2000 (the even keys)", kept)
	}
}

// TestBucketJoinSideFileWithGlobCharacters: a bucket of the side table
// is planned from the files the table's plan found, by their names: a
// file "part[0].parquet" is that file, not the glob "part0.parquet"
// (which matched nothing, and the join refused the table).
func TestBucketJoinSideFileWithGlobCharacters(t *testing.T) {
	dir := t.TempDir()
	files := bucketedData(t, dir)
	side := filepath.Join(dir, "side", "bucket=3")
	if err := os.Rename(filepath.Join(side, "part-0.parquet"), filepath.Join(side, "part[0].parquet")); err != nil {
		t.Fatal(err)
	}
	fields := inputFields(t, files)
	ctx := context.Background()
	whole, err := ops.Compile(ctx, job(t, dir, "- join: {kind: left, table: side, on: key, columns: [feat]}"), fields, ops.Env{})
	if err != nil {
		t.Fatal(err)
	}
	bucketed, err := ops.Compile(ctx, job(t, dir, fmt.Sprintf("- join: {kind: left, table: side, on: key, columns: [feat], buckets: %d}", nBuckets)), fields, ops.Env{})
	if err != nil {
		t.Fatal(err)
	}
	want, got := joinAll(t, whole, files, 1), joinAll(t, bucketed, files, 2)
	if len(got) != len(want) || want[6] != 60 {
		t.Fatalf("bucket join: %d rows, whole-table join %d (feat(6)=%d)", len(got), len(want), want[6])
	}
	for id, f := range want {
		if got[id] != f {
			t.Fatalf("id %d: bucket join feat %d, whole-table join %d", id, got[id], f)
		}
	}
}

func TestBucketJoinErrors(t *testing.T) {
	dir := t.TempDir()
	files := bucketedData(t, dir)
	fields := inputFields(t, files)
	ctx := context.Background()
	f := func(step, want string, atRun bool) {
		t.Helper()
		p, err := ops.Compile(ctx, job(t, dir, step), fields, ops.Env{})
		if !atRun {
			wantErr(t, err, want)
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		_, err = runUnits(p, files)
		wantErr(t, err, want)
	}
	// Declared with the wrong count: a directory out of range, or keys
	// found in the wrong bucket as the buckets load.
	f("- join: {kind: semi, table: side, on: key, buckets: 4}", "bucket=4: want a bucket from 0 to 3", false)
	f("- join: {kind: semi, table: side, on: key, buckets: 16}", "is not bucketed as declared", true)
	// A bucket that cannot fit the budget alone.
	f("- join: {kind: semi, table: side, on: key, buckets: 8, max_memory: 1KiB}", "raise max_memory or use more buckets", false)
	// An input row whose key lies in another bucket than its file's.
	var stray int64 = 1
	for iceberg.BucketInt(nBuckets, stray) == 0 {
		stray++
	}
	bad := filepath.Join(dir, "in", "bucket=0", "stray.parquet")
	writeTable(t, bad, []inRow{{ID: 9999, Key: stray}})
	p, err := ops.Compile(ctx, job(t, dir, "- join: {kind: left, table: side, on: key, columns: [feat], buckets: 8}"), fields, ops.Env{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = runUnits(p, []string{bad})
	wantErr(t, err, "the input is not bucketed as declared")
	// A side table file outside any bucket directory.
	writeTable(t, filepath.Join(dir, "side", "stray.parquet"), []sideRow{{Key: 1, Feat: 1}})
	f("- join: {kind: semi, table: side, on: key, buckets: 8}", "is under no bucket=B directory", false)
}

// runUnits runs p over the files' units on one goroutine.
func runUnits(p *ops.Program, files []string) (int, error) {
	ctx := context.Background()
	plan, err := decode.PlanFiles(ctx, files, decode.PlanOptions{Columns: []string{"id", "key"}})
	if err != nil {
		return 0, err
	}
	st, dec := p.NewState(), plan.NewDecoder()
	defer dec.Close()
	n := 0
	for _, u := range plan.Units {
		var b column.Batch
		if err := dec.Decode(ctx, u, &b); err != nil {
			return n, err
		}
		st.BeginUnit(ctx, u.File)
		out, err := runErr(p, st, &b)
		st.EndUnit()
		if err != nil {
			return n, err
		}
		n += out.Rows
	}
	return n, nil
}

// BenchmarkBucketJoin runs the same left join over the same units loading
// the table whole once (whole) and by bucket within a budget of about two
// buckets of eight (bucketed), on 4 goroutines: what bucket loads and
// evictions cost against a table that fits. Compare the two in one run.
func BenchmarkBucketJoin(b *testing.B) {
	dir := b.TempDir()
	files := bucketedData(b, dir)
	fields := inputFields(b, files)
	for _, tc := range []struct{ name, step string }{
		{"whole", "- join: {kind: left, table: side, on: key, columns: [feat]}"},
		{"bucketed", "- join: {kind: left, table: side, on: key, columns: [feat], buckets: 8, max_memory: 24KiB}"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := ops.Compile(context.Background(), job(b, dir, tc.step), fields, ops.Env{})
				if err != nil {
					b.Fatal(err)
				}
				joinAll(b, p, files, 4)
			}
		})
	}
}
