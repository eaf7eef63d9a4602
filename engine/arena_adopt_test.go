package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// A run that adopts its rings (a daemon restarting, or a job handed over
// by DetachRings) cannot serve them from the arena it creates before the
// rings are adopted: named by no ring, that arena is removed at once
// (settleArenas). Emulating the daemon (Remove: false, then removing the
// rings and the arena of the first run) leaves nothing behind.
func TestArenaAdoptionLeavesNoArena(t *testing.T) {
	dir := t.TempDir()
	abs, _ := filepath.Abs("../testdata/small")
	src := fmt.Sprintf("inputs: [%s]\ncolumns: [row_id, seq_0, query_opt]\nbatch: {size: 300}\nworld_size: 2\nepochs: 2\nseed: 9\n"+
		"shuffle: {units: true}\ndecode: {workers: 2}\nring: {dir: %s, name: h, slots: 3, arena: true}\n", abs, dir)
	job, err := spec.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var read atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, job.WorldSize)
	resume := handOver(t, job, &wg, &read, 6, func(r int, name string) {
		_, errs[r] = consumeSlowly(dir, name, &read, time.Millisecond)
	})
	before, _ := filepath.Glob(filepath.Join(dir, "arena+*"))
	// The second run adopts the rings (Take consumes the claims DetachRings left).
	if _, err := engine.Run(context.Background(), job, engine.Options{Resume: resume}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	after, _ := filepath.Glob(filepath.Join(dir, "arena+*"))
	t.Logf("arenas before the adopting run: %v; after: %v", before, after)
	// What daemon/jobrings.go removeRings does: each ring, then the arena
	// the rings name.
	named := map[uint64]bool{}
	for r := 0; r < job.WorldSize; r++ {
		name := job.RingName(r)
		o, err := shm.Observe(dir, name)
		if err != nil {
			t.Fatal(err)
		}
		named[o.Header().ArenaID] = true
		o.Close()
		os.Remove(filepath.Join(dir, name))
	}
	for id := range named {
		if _, err := shm.RemoveArena(dir, id, uint32(os.Getuid())); err != nil {
			t.Fatal(err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
		t.Errorf("after removing the rings and the arena they name, left in the ring directory: %v "+
			"(the adopting run's arena, which no ring names)", left)
	}
}

// A run that replaces a dead run's rings removes the arena they named
// once none of its rings names it (settleArenas): a crashed lastmile run
// leaves no arena behind after the next.
func TestArenaOfReplacedRingsRemoved(t *testing.T) {
	dir := t.TempDir()
	abs, _ := filepath.Abs("../testdata/small")
	job, err := spec.Parse("t.yaml", []byte(fmt.Sprintf("inputs: [%s]\ncolumns: [row_id]\nbatch: {size: 100}\nring: {dir: %s, name: d, arena: true}\n", abs, dir)))
	if err != nil {
		t.Fatal(err)
	}
	// The dead run: its ring and arena left in place.
	old, err := shm.CreateArena(shm.ArenaConfig{Dir: dir, Size: 4096})
	if err != nil {
		t.Fatal(err)
	}
	p, err := shm.Create(shm.Config{Dir: dir, Name: "d", Arena: old, SlotSize: 1 << 16,
		Fields: []shm.Field{{Name: "row_id", Kind: shm.Dense, DType: shm.Int64}}})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	old.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	drained := make(chan error, 1)
	ready := func(rings []string) {
		go func() { drained <- digestRing(ctx, dir, rings[0]).err }()
	}
	if _, err := engine.Run(ctx, job, engine.Options{Linger: true, Remove: true, Ready: ready}); err != nil {
		t.Fatal(err)
	}
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
		t.Errorf("left in the ring directory: %v; want the dead run's arena removed with its ring", left)
	}
}
