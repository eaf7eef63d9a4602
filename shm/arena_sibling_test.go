package shm_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lastmile/lastmile/shm"
)

// Two rings of one job name arena A. Their producer goes away: ring r0
// is handed over running (Detach: claimed, as a restarting daemon's
// Claim leaves it), ring r1 ended (it is not adoptable). The next run
// adopts r0, which keeps naming A (line 0 is immutable, §8.3), and
// creates r1 afresh with its own arena B. Create, replacing r1's stale
// file, must leave A: r0, adopted and running, still names it and its
// published batches lie in it, for a trainer that (re)opens r0. (Create
// reports A as replaced; the engine, which knows all the job's rings,
// removes it only if none names it: settleArenas.)
func TestReplacingARingLeavesTheArenaItNamed(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	a, err := shm.CreateArena(shm.ArenaConfig{Dir: dir, Size: 8192})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	cfg := func(name string, arena *shm.Arena) shm.Config {
		c := testConfig(t, name, 3)
		c.Dir, c.Arena = dir, arena
		return c
	}
	p0, err := shm.Create(cfg("r0", a))
	if err != nil {
		t.Fatal(err)
	}
	p1, err := shm.Create(cfg("r1", a))
	if err != nil {
		t.Fatal(err)
	}
	if err := writeArenaBatch(ctx, p0, a, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := writeArenaBatch(ctx, p1, a, 0, 4096); err != nil {
		t.Fatal(err)
	}
	if _, err := p0.Detach(); err != nil { // r0: handed over, still running
		t.Fatal(err)
	}
	p1.Close() // r1: its stream ended

	// The next run: a new arena, r0 adopted, r1 created.
	b, err := shm.CreateArena(shm.ArenaConfig{Dir: dir, Size: 8192})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove()
	q0, err := shm.Take(cfg("r0", b))
	if err != nil {
		t.Fatal(err)
	}
	defer q0.Close()
	if q0.Generation() != p0.Generation() || q0.Arena() != nil {
		t.Fatal("r0 was not adopted")
	}
	q1, err := shm.Take(cfg("r1", b))
	if err != nil {
		t.Fatal(err)
	}
	defer q1.Close()

	if _, err := os.Stat(a.Path()); err != nil {
		t.Errorf("arena %s, which adopted ring r0 still names: %v", filepath.Base(a.Path()), err)
	}
	c, err := shm.Open(dir, "r0")
	if err != nil {
		t.Fatalf("a trainer reopening the adopted ring r0: %v", err)
	}
	defer c.Close()
	bt, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkBatch(bt, 0); err != nil {
		t.Fatal(err)
	}
}
