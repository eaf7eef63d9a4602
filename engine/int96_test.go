package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
)

// sparkRow is a table as Spark writes it by default: its event time an
// INT96 timestamp, dictionary-encoded.
type sparkRow struct {
	RowID int64            `parquet:"row_id"`
	TS    deprecated.Int96 `parquet:"ts,dict"`
}

func int96Of(t time.Time) deprecated.Int96 {
	sec := t.Unix()
	days := sec / 86400
	if sec%86400 < 0 {
		days--
	}
	nod := uint64((sec-days*86400)*1e9 + int64(t.Nanosecond()))
	return deprecated.Int96{uint32(nod), uint32(nod >> 32), uint32(days + 2440588)}
}

// TestInt96TimeWindow keeps the rows of the last week by a filter on an
// INT96 event time, and hands the trainer the times as int64 nanoseconds.
func TestInt96TimeWindow(t *testing.T) {
	dir := t.TempDir()
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return start.Add(time.Duration(i%1000) * 37 * time.Minute) }
	rows := make([]sparkRow, 5000)
	for i := range rows {
		rows[i] = sparkRow{RowID: int64(i), TS: int96Of(at(i))}
	}
	path := filepath.Join(dir, "events.parquet")
	if err := parquet.WriteFile(path, rows, parquet.MaxRowsPerRowGroup(2000)); err != nil {
		t.Fatal(err)
	}
	cut := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	src := fmt.Sprintf(`
inputs: [%s]
columns: [row_id, ts]
batch: {size: 100, last: keep}
ring: {dir: %s, name: ts}
pipeline:
  - filter: 'ts >= timestamp("2026-11-20")'
`, path, dir)
	got := runDense(t, src, dir, "row_id", "ts")
	r := struct{ ids, ts []int64 }{got["row_id"], got["ts"]}
	var want []int64
	for i := range rows {
		if !at(i).Before(cut) {
			want = append(want, int64(i))
		}
	}
	if len(want) == 0 || len(want) == len(rows) || !slices.Equal(r.ids, want) {
		t.Fatalf("kept rows %d..., want the %d rows from %v on", len(r.ids), len(want), cut)
	}
	for k, id := range r.ids {
		if got := time.Unix(0, r.ts[k]).UTC(); !got.Equal(at(int(id))) {
			t.Fatalf("row %d: ts %v, want %v", id, got, at(int(id)))
		}
	}
}

// runDense runs the job src, with its ring in dir, and returns the
// values of its dense 8-byte columns named, over every batch in order.
func runDense(t testing.TB, src, dir string, names ...string) map[string][]int64 {
	t.Helper()
	_, cols := runDenseStats(t, src, dir, names...)
	return cols
}

// runDenseStats is runDense that returns the run's Stats too.
func runDenseStats(t testing.TB, src, dir string, names ...string) (engine.Stats, map[string][]int64) {
	t.Helper()
	job, err := spec.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		cols map[string][]int64
		err  error
	}
	done := make(chan result, 1)
	opts := engine.Options{Linger: true, Ready: func(rings []string) {
		go func() {
			r := result{cols: map[string][]int64{}}
			defer func() { done <- r }()
			c, err := shm.Open(dir, rings[0])
			if err != nil {
				r.err = err
				return
			}
			defer c.Close()
			for {
				b, err := c.Next(ctx)
				if err != nil {
					if !errors.Is(err, io.EOF) {
						r.err = err
					}
					return
				}
				for _, name := range names {
					v := b.Tensor(name, shm.RoleDense)
					r.cols[name] = append(r.cols[name], unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(v.Data))), b.Rows)...)
				}
			}
		}()
	}}
	st, err := engine.Run(ctx, job, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	return st, r.cols
}
