package engine_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// recordStager notes each slot it sees and checks that it is not yet
// published; it fails with err at the failAt-th call (0: never).
type recordStager struct {
	mu     sync.Mutex
	seen   map[int][]uint64
	bad    []string
	calls  int
	failAt int
}

func (s *recordStager) Stage(ctx context.Context, rank int, ring *shm.Producer, slot *shm.Slot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls == s.failAt {
		return errors.New("injected")
	}
	if tail := ring.Stats().Tail; tail != slot.Seq() {
		s.bad = append(s.bad, "staged after publish")
	}
	if slot.Used() <= 64 || slot.Used() > slot.Cap() {
		s.bad = append(s.bad, "used bytes out of range")
	}
	s.seen[rank] = append(s.seen[rank], slot.Seq())
	return nil
}

// TestStager: every batch of every rank passes through the stager once,
// in publish order, before its publish; a stager's error fails the run.
func TestStager(t *testing.T) {
	src := `
inputs: [DATA]
columns: [row_id, label]
batch: {size: 1000, last: pad}
world_size: 2
ring: {dir: RINGDIR, name: st, slots: 3}
`
	for _, failAt := range []int{0, 4} {
		st := &recordStager{seen: map[int][]uint64{}, failAt: failAt}
		stats, res, err := runStaged(t, src, st)
		if failAt > 0 {
			if err == nil || !strings.Contains(err.Error(), "injected") {
				t.Fatalf("a failing stager: run error %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(st.bad) > 0 {
			t.Fatalf("stager saw: %v", st.bad)
		}
		for r := range 2 {
			if len(st.seen[r]) != len(res[r].batches) || len(res[r].batches) == 0 {
				t.Fatalf("rank %d: staged %d batches, the trainer got %d", r, len(st.seen[r]), len(res[r].batches))
			}
			for i, seq := range st.seen[r] {
				if seq != uint64(i) {
					t.Fatalf("rank %d: staged %v, want 0, 1, 2, ...", r, st.seen[r])
				}
			}
		}
		if int64(st.calls) != stats.Batches {
			t.Fatalf("%d stage calls for %d batches", st.calls, stats.Batches)
		}
	}
}

// cancelStager cancels the run at its n-th call, as a daemon stopping a
// job does while a copy runs.
type cancelStager struct {
	n      int
	cancel context.CancelFunc
}

func (c *cancelStager) Stage(ctx context.Context, rank int, ring *shm.Producer, slot *shm.Slot) error {
	if c.n--; c.n == 0 {
		c.cancel()
	}
	return ctx.Err()
}

// TestStagerCancel: a run canceled while a slot is being staged stops
// with the context's error, and the slot is not published.
func TestStagerCancel(t *testing.T) {
	dir := t.TempDir()
	abs, _ := filepath.Abs("../testdata/small")
	job, err := spec.Parse("test.yaml", []byte("inputs: ["+abs+"]\ncolumns: [row_id]\nbatch: {size: 100}\nring: {dir: "+dir+", name: c, slots: 8}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := &cancelStager{n: 3, cancel: cancel}
	stats, err := engine.Run(ctx, job, engine.Options{Stage: st})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run error %v, want context.Canceled", err)
	}
	in, err := shm.Inspect(dir, stats.Rings[0])
	if err != nil {
		t.Fatal(err)
	}
	if in.Tail != 2 {
		t.Fatalf("%d batches published; want 2, the third being staged when the run was canceled", in.Tail)
	}
}

func runStaged(t *testing.T, src string, st engine.Stager) (engine.Stats, []got, error) {
	t.Helper()
	dir := t.TempDir()
	abs, _ := filepath.Abs("../testdata/small")
	src = strings.ReplaceAll(strings.ReplaceAll(src, "DATA", abs), "RINGDIR", dir)
	job, err := spec.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	res := make([]got, job.WorldSize)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stats, err := engine.Run(ctx, job, engine.Options{Linger: true, Stage: st, Ready: func(rings []string) {
		for r, name := range rings {
			wg.Add(1)
			go func() { defer wg.Done(); res[r] = consume(ctx, dir, name) }()
		}
	}})
	if err != nil {
		cancel()
	}
	wg.Wait()
	return stats, res, err
}
