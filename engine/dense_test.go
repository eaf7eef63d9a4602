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
	cols := map[string][]int64{}
	st := runConsumed(t, src, func(ctx context.Context, ring string) error {
		return eachBatch(ctx, dir, ring, func(b *shm.Batch) {
			for _, name := range names {
				v := b.Tensor(name, shm.RoleDense)
				cols[name] = append(cols[name], unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(v.Data))), b.Rows)...)
			}
		})
	})
	return st, cols
}

// eachBatch reads ring dir/ring to its end, calling fn with each batch
// (valid only during the call: fn copies what it keeps).
func eachBatch(ctx context.Context, dir, ring string, fn func(b *shm.Batch)) error {
	c, err := shm.Open(dir, ring)
	if err != nil {
		return err
	}
	defer c.Close()
	for {
		b, err := c.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		fn(b)
		c.Release()
	}
}

// runConsumed runs the job src with read consuming its first ring from
// the moment the rings exist, and returns once read has reached the
// ring's end.
func runConsumed(t testing.TB, src string, read func(ctx context.Context, ring string) error) engine.Stats {
	t.Helper()
	job, err := spec.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	opts := engine.Options{Linger: true, Ready: func(rings []string) {
		go func() { done <- read(ctx, rings[0]) }()
	}}
	st, err := engine.Run(ctx, job, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return st
}
