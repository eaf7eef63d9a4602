package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// A run that replaces a dead run's ring (rank 0) and then fails to
// create a later rank's ring removes the ring it made and, since no ring
// of the job is left to name it, the arena the replaced ring named
// (createRings' failure path: settleArenas never runs).
func TestArenaOfReplacedRingRemovedWhenRingsFail(t *testing.T) {
	dir := t.TempDir()
	abs, _ := filepath.Abs("../testdata/small")
	job, err := spec.Parse("t.yaml", []byte(fmt.Sprintf("inputs: [%s]\ncolumns: [row_id]\nbatch: {size: 100}\nworld_size: 2\nring: {dir: %s, name: d, arena: true}\n", abs, dir)))
	if err != nil {
		t.Fatal(err)
	}
	old, err := shm.CreateArena(shm.ArenaConfig{Dir: dir, Size: 4096})
	if err != nil {
		t.Fatal(err)
	}
	p, err := shm.Create(shm.Config{Dir: dir, Name: job.RingName(0), Arena: old, SlotSize: 1 << 16,
		Fields: []shm.Field{{Name: "row_id", Kind: shm.Dense, DType: shm.Int64}}})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	old.Close()
	// Rank 1's name holds a file Create refuses to replace.
	if err := os.WriteFile(filepath.Join(dir, job.RingName(1)), []byte("not a ring"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Run(context.Background(), job, engine.Options{Remove: true}); err == nil {
		t.Fatal("run succeeded; want rank 1's ring refused")
	}
	if _, err := os.Stat(filepath.Join(dir, job.RingName(0))); err == nil {
		t.Fatalf("rank 0's ring left")
	}
	if _, err := os.Stat(old.Path()); err == nil {
		t.Errorf("arena %s of the replaced ring %s left behind, named by no ring", filepath.Base(old.Path()), job.RingName(0))
	}
}
