package main_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Two kill -9 restarts in a row while trainers hold batches; every
// row read exactly once per epoch, and nothing left in shm.
func TestArenaTwoRestarts(t *testing.T) {
	e := newEnv(t)
	e.start()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	spec := fmt.Sprintf("name: arena\ninputs: [%s]\ncolumns: [row_id]\nbatch: {size: 100}\nworld_size: 2\nepochs: 2\nring: {slots: 4, arena: true}\n", smallData)
	j := e.submit(spec, nil)
	readers := []*reader{{e: e, job: j.ID, rank: 0, delay: 5 * time.Millisecond}, {e: e, job: j.ID, rank: 1, delay: 5 * time.Millisecond}}
	wait := startReaders(ctx, readers)
	waitFor(t, "6 batches read", 30*time.Second, func() bool { return readers[0].count()+readers[1].count() >= 6 })
	e.kill9()
	e.start()
	waitFor(t, "12 batches read", 30*time.Second, func() bool { return readers[0].count()+readers[1].count() >= 12 })
	e.kill9()
	e.start()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	e.waitJob(j.ID, 10*time.Second, "done")
	var rows []int64
	for _, r := range readers {
		rows = append(rows, r.rows...)
	}
	t.Logf("rows read %d, reattach %d/%d", len(rows), readers[0].reattach, readers[1].reattach)
	e.waitShmEmpty("nothing in shm", 10*time.Second)
}

// A job restarted and cancelled at once: its arenas go with its
// rings once reclaimed.
func TestArenaCancelAfterRestart(t *testing.T) {
	e, j, _, stop := endlessArenaJob(t)
	defer stop()
	e.kill9()
	e.start("-grace", "1s")
	if st, err := e.do("DELETE", "/v1/jobs/"+j.ID, nil, nil); err != nil || st >= 300 {
		t.Fatalf("cancel: %d %v", st, err)
	}
	stop()
	e.waitJob(j.ID, 10*time.Second, "canceled")
	e.waitShmEmpty("nothing in shm", 20*time.Second)
}

// Two hosts of a world of 4 with the unit arena, host 1's daemon
// killed and restarted mid-epoch: every row of an epoch goes to one rank
// of the world at most, the hosts' steps agree, and each host's shm is
// empty once its job is done. The job reports its arena size as memory.
func TestArenaHostsRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	spec := fmt.Sprintf("name: world\ninputs: [%s]\ncolumns: [row_id]\nbatch: {size: 100}\nworld_size: 4\nepochs: 2\nseed: 7\nshuffle: {units: true}\nring: {slots: 4, arena: true}\n", smallData)
	var envs []*env
	var readers []*reader
	var ids []string
	for h := range 2 {
		e := newEnv(t)
		e.start()
		j := e.submit(spec, map[string]any{"hosts": 2, "host": h})
		envs, ids = append(envs, e), append(ids, j.ID)
		readers = append(readers, &reader{e: e, job: j.ID, rank: 2 * h, delay: 3 * time.Millisecond}, &reader{e: e, job: j.ID, rank: 2*h + 1, delay: 3 * time.Millisecond})
	}
	wait := startReaders(ctx, readers)
	waitFor(t, "host 1 read 10 batches", 30*time.Second, func() bool { return readers[2].count()+readers[3].count() >= 10 })
	envs[1].kill9()
	envs[1].start()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	seen := map[[2]int64]int{}
	counts := []int{}
	for _, r := range readers {
		counts = append(counts, r.count())
		for k, c := range r.cursors {
			for _, id := range r.rows[k*100 : (k+1)*100] {
				seen[[2]int64{int64(c.Epoch), id}]++
			}
		}
	}
	for k, n := range seen {
		if n > 1 {
			t.Fatalf("epoch %d row %d read %d times", k[0], k[1], n)
		}
	}
	if counts[0] != counts[1] || counts[0] != counts[2] || counts[2] != counts[3] {
		t.Fatalf("batches per rank %v", counts)
	}
	t.Logf("batches per rank %v", counts)
	for h, e := range envs {
		e.waitJob(ids[h], 10*time.Second, "done")
		e.waitShmEmpty(fmt.Sprintf("nothing in host %d's shm", h), 10*time.Second)
	}
}

// After a restart that adopts every ring, exactly one arena (the
// first run's, which the rings name) is in shm while the job runs, and the
// daemon logs no failure removing arenas at the end.
func TestArenaOneArenaAfterRestart(t *testing.T) {
	e, j, readers, stop := endlessArenaJob(t)
	defer stop()
	arenas := func() []string { m, _ := filepath.Glob(filepath.Join(e.shm, "arena+*")); return m }
	first := arenas()
	for i := range 2 {
		e.kill9()
		e.start("-grace", "1s")
		n := readers[0].count() + readers[1].count()
		waitFor(t, "10 more batches read", 30*time.Second, func() bool { return readers[0].count()+readers[1].count() >= n+10 })
		if got := arenas(); len(got) != 1 || got[0] != first[0] {
			t.Errorf("restart %d: arenas %v, want the first run's %v", i, got, first)
		}
	}
	stop()
	e.do("DELETE", "/v1/jobs/"+j.ID, nil, nil)
	e.waitShmEmpty("nothing in shm", 20*time.Second)
	time.Sleep(300 * time.Millisecond)
	if s := e.log.String(); strings.Contains(s, "remove unit arena") {
		t.Errorf("the daemon warned removing an arena:\n%s", grepLines(s, "remove unit arena"))
	}
}

// endlessArenaJob starts a daemon (grace 1s) with a job of no end and a
// unit arena, read by two slow trainers until 6 batches are read; stop
// stops the trainers (more than once is fine).
func endlessArenaJob(t *testing.T) (*env, jobJSON, []*reader, func()) {
	e := newEnv(t)
	e.start("-grace", "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	spec := fmt.Sprintf("name: arena\ninputs: [%s]\ncolumns: [row_id]\nbatch: {size: 100}\nworld_size: 2\nepochs: 0\nring: {slots: 4, arena: true}\n", smallData)
	j := e.submit(spec, nil)
	readers := []*reader{{e: e, job: j.ID, rank: 0, delay: 5 * time.Millisecond}, {e: e, job: j.ID, rank: 1, delay: 5 * time.Millisecond}}
	wait := startReaders(ctx, readers)
	waitFor(t, "6 batches read", 30*time.Second, func() bool { return readers[0].count()+readers[1].count() >= 6 })
	var once sync.Once
	return e, j, readers, func() {
		once.Do(func() {
			cancel()
			wait()
		})
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
