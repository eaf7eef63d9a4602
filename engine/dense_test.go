package engine_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"unsafe"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

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
