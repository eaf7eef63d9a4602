package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A job with the unit arena (ring.arena) runs under the daemon as under
// lastmile run: each row once to its rank, the arena a 0600 file beside
// the rings while they live, removed with them once the job is drained.
func TestArenaJob(t *testing.T) {
	e := newEnv(t)
	e.start()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	spec := fmt.Sprintf("name: arena\ninputs: [%s]\nbatch: {size: 100}\nworld_size: 2\nshuffle: {units: true}\nring: {slots: 4, arena: true}\n", smallData)
	j := e.submit(spec, nil)
	arenas := func() []string {
		m, _ := filepath.Glob(filepath.Join(e.shm, "arena+*"))
		return m
	}
	waitFor(t, "the unit arena", 10*time.Second, func() bool { return len(arenas()) == 1 })
	if st, err := os.Stat(arenas()[0]); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("arena %v: %v; want mode 0600", st, err)
	}
	readers := []*reader{{e: e, job: j.ID, rank: 0}, {e: e, job: j.ID, rank: 1}}
	if err := startReaders(ctx, readers)(); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, "the arena job", append(readers[0].rows, readers[1].rows...), 10000)
	done := e.waitJob(j.ID, 10*time.Second, "done")
	// Every unit (a whole row group of testdata/small) decoded into the arena.
	if p := done.Progress; p.ArenaUnits == 0 || p.ArenaUnits != p.UnitsDone || p.ArenaToHeap != 0 {
		t.Errorf("the job reports %d units into the arena and %d to the heap of %d, want all of them into it", p.ArenaUnits, p.ArenaToHeap, p.UnitsDone)
	}
	e.waitShmEmpty("rings and arena removed", 10*time.Second)
}
