package engine_test

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

var rvDebug = false

// sweep runs the property tests (prop_*_test.go) over every combination
// and every resume position: `go test ./engine -sweep` (make sweep,
// several minutes). Without it each runs a fixed sample, for make test.
var sweep = flag.Bool("sweep", false, "run the engine's property tests over every combination (minutes)")

// sampled counts combination *n of a property test and reports whether
// it runs: every one with -sweep, else every every-th from the first
// (every raceSparse x every-th under the race detector).
func sampled(n *int, every int) bool {
	*n++
	return *sweep || (*n-1)%(every*raceSparse) == 0
}

// resumeAt reports whether a resume at step k of an epoch of per steps
// runs: every step with -sweep, else the first two, the middle and the
// last two (the epoch's end included).
func resumeAt(k, per int) bool {
	return *sweep || k <= 1 || k == per/2 || k >= per-1
}

// rvStream is one rank's batches: cursor and a hash of every byte.
type rvStream struct {
	cur  []shm.Cursor
	hash []string
	ids  [][]int64
}

type rvCfg struct {
	last    string
	buf     int
	world   int
	epochs  int
	size    int
	pipe    string // pipeline yaml lines, or ""
	mur     int    // max_unit_rows (0: row groups)
	cache   bool
	units   bool
	workers int
	arena   bool
}

func (c rvCfg) String() string {
	return fmt.Sprintf("last=%s buf=%d world=%d size=%d pipe=%q mur=%d cache=%v workers=%d", c.last, c.buf, c.world, c.size, c.pipe, c.mur, c.cache, c.workers)
}

func (c rvCfg) src(dir string) string {
	abs, _ := filepath.Abs("../testdata/small")
	ep := c.epochs
	s := fmt.Sprintf("inputs: [%s]\ncolumns: [row_id, seq_0, query_opt, dense_0]\nbatch: {size: %d, last: %s}\nworld_size: %d\nepochs: %d\nseed: 4242\nshuffle: {units: %v, buffer: %d}\n",
		abs, c.size, c.last, c.world, ep, c.units, c.buf)
	ar := ""
	if c.arena {
		ar = ", arena: true"
	}
	s += fmt.Sprintf("ring: {dir: %q, name: r, slots: 3%s}\ndecode: {workers: %d, max_unit_rows: %d}\n", dir, ar, c.workers, c.mur)
	if c.cache {
		s += "cache: {max_memory: 1GiB}\n"
	}
	if c.pipe != "" {
		s += "pipeline:\n" + c.pipe
	}
	return s
}

func rvRun(t *testing.T, c rvCfg, opts engine.Options) ([]rvStream, engine.Stats, error) {
	t.Helper()
	dir := t.TempDir()
	job, err := spec.Parse("t.yaml", []byte(c.src(dir)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var res []rvStream
	var errs []error
	var wg sync.WaitGroup
	opts.Ready = func(rings []string) {
		names, res, errs = rings, make([]rvStream, len(rings)), make([]error, len(rings))
		for r, name := range rings {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[r] = eachBatch(context.Background(), dir, name, func(b *shm.Batch) {
					h, _ := hashBatch(b)
					res[r].cur = append(res[r].cur, b.Cursor)
					res[r].hash = append(res[r].hash, h)
					if tt := b.Tensor("row_id", shm.RoleDense); tt != nil {
						v := make([]int64, b.Rows)
						for i := range v {
							v[i] = int64(uint64(tt.Data[8*i]) | uint64(tt.Data[8*i+1])<<8 | uint64(tt.Data[8*i+2])<<16 | uint64(tt.Data[8*i+3])<<24 | uint64(tt.Data[8*i+4])<<32 | uint64(tt.Data[8*i+5])<<40 | uint64(tt.Data[8*i+6])<<48 | uint64(tt.Data[8*i+7])<<56)
						}
						res[r].ids = append(res[r].ids, v)
					}
				})
			}()
		}
	}
	st, err := engine.Run(context.Background(), job, opts)
	if rvDebug {
		t.Logf("run %v resume %v hosts %+v: err %v", c, opts.Resume, opts.Hosts, err)
	}
	wg.Wait()
	if err != nil {
		return nil, st, err
	}
	for r, e := range errs {
		if e != nil {
			t.Fatalf("%v: ring %s: %v", c, names[r], e)
		}
	}
	return res, st, nil
}

// rvTail is s from cursor cur on.
func rvTail(s rvStream, cur engine.Cursor) rvStream {
	var o rvStream
	for k, c := range s.cur {
		if !(engine.Cursor{Epoch: c.Epoch, Batch: c.BatchIndex}).Less(cur) {
			o.cur = append(o.cur, c)
			o.hash = append(o.hash, s.hash[k])
			if k < len(s.ids) {
				o.ids = append(o.ids, s.ids[k])
			}
		}
	}
	return o
}

// rvDiff describes the first difference of two runs' streams, "" if none.
func rvDiff(got, want []rvStream) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d ranks, want %d", len(got), len(want))
	}
	for r := range want {
		g, w := got[r], want[r]
		n := min(len(g.hash), len(w.hash))
		for k := 0; k < n; k++ {
			if g.cur[k] != w.cur[k] || g.hash[k] != w.hash[k] {
				var gi, wi []int64
				if k < len(g.ids) {
					gi = g.ids[k][:min(8, len(g.ids[k]))]
				}
				if k < len(w.ids) {
					wi = w.ids[k][:min(8, len(w.ids[k]))]
				}
				return fmt.Sprintf("rank %d batch #%d: cursor %+v rows %v..., want cursor %+v rows %v...", r, k, g.cur[k], gi, w.cur[k], wi)
			}
		}
		if len(g.hash) != len(w.hash) {
			return fmt.Sprintf("rank %d: %d batches, want %d", r, len(g.hash), len(w.hash))
		}
	}
	return ""
}
