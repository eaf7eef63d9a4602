package main_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lastmile/lastmile/shm"
)

// TestKill9MidEpoch kills the daemon with SIGKILL while two trainer ranks
// read mid-epoch, starts it again on the same state and shm directories,
// and checks that the readers, reattaching with their cursors, get every
// row of the epoch exactly once from the same rings (adopted, not
// recreated).
func TestKill9MidEpoch(t *testing.T) {
	e := newEnv(t)
	e.start()
	j := e.submit(specFor("k9", smallData, "world_size: 2\n"), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	readers := []*reader{{e: e, job: j.ID, rank: 0, delay: 3 * time.Millisecond}, {e: e, job: j.ID, rank: 1, delay: 3 * time.Millisecond}}
	wait := startReaders(ctx, readers)
	waitFor(t, "20 batches read", 30*time.Second, func() bool { return readers[0].count()+readers[1].count() >= 20 })
	e.kill9()
	time.Sleep(300 * time.Millisecond) // long enough for the readers to see the producer die
	e.start()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	var all []int64
	for _, r := range readers {
		if len(r.cursors) != 50 {
			t.Errorf("rank %d: %d batches, want 50", r.rank, len(r.cursors))
		}
		checkAdopted(t, r)
		all = append(all, r.rows...)
	}
	checkExactlyOnce(t, "epoch after kill -9", all, 10000)
	got := e.waitJob(j.ID, 10*time.Second, "done")
	if got.Restarts != 1 {
		t.Errorf("generation_restarts %d, want 1", got.Restarts)
	}
}

// checkAdopted checks what a reader of epoch 0 read across a kill -9 of
// its daemon: every batch once, in order, for its rank, from a ring the
// restarted daemon adopted.
func checkAdopted(t *testing.T, r *reader) {
	t.Helper()
	for i, c := range r.cursors {
		if c.Epoch != 0 || c.BatchIndex != uint64(i) || c.Rank != uint32(r.rank) {
			t.Fatalf("rank %d batch %d has cursor %+v", r.rank, i, c)
		}
	}
	if r.reattach == 0 {
		t.Errorf("rank %d never saw the producer die", r.rank)
	}
	for _, g := range r.gens {
		if g != r.gens[0] {
			t.Errorf("rank %d: generations %v: the ring was recreated, not adopted", r.rank, r.gens)
		}
	}
}

// TestTrainerKillReattach kills a trainer process twice while it holds a
// batch. First it reattaches with the cursor of the held batch (it did not
// finish it): the same ring continues. Then with the cursor after the held
// batch (it did): production restarts for that rank from its cursor, while
// the other rank reads on, undisturbed, from its own ring.
func TestTrainerKillReattach(t *testing.T) {
	e := newEnv(t)
	e.start()
	j := e.submit(specFor("tk", smallData, "world_size: 2\n"), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	other := &reader{e: e, job: j.ID, rank: 1, delay: 2 * time.Millisecond}
	otherErr := make(chan error, 1)
	go func() { otherErr <- other.run(ctx) }()

	attach := func(body map[string]any) attachJSON {
		t.Helper()
		var a attachJSON
		if st, err := e.do("POST", "/v1/jobs/"+j.ID+"/attach", body, &a); err != nil || st != 200 {
			t.Fatalf("attach: %d %v", st, err)
		}
		return a
	}
	a := attach(map[string]any{"rank": 0})
	rows1, curs1 := runTrainer(t, a, 10) // batches 0..9, holding 9
	if curs1[9].BatchIndex != 9 {
		t.Fatalf("trainer read %+v", curs1)
	}
	// The trainer did not finish batch 9: it resumes there, on the same ring.
	b := attach(map[string]any{"rank": 0, "cursor": cursor{0, 9}})
	if b.Restarted || b.Generation != a.Generation || b.Next == nil || *b.Next != (cursor{0, 9}) {
		t.Fatalf("reattach at the held batch: %+v, want the same ring (generation %d) at batch 9", b, a.Generation)
	}
	rows2, curs2 := runTrainer(t, b, 10) // batches 9..18, holding 18
	if curs2[0].BatchIndex != 9 || curs2[9].BatchIndex != 18 {
		t.Fatalf("second trainer read %d..%d", curs2[0].BatchIndex, curs2[9].BatchIndex)
	}
	// Now it finished batch 18 and wants 19: the ring stands at 18, so
	// production restarts for rank 0 from 19.
	r0 := &reader{e: e, job: j.ID, rank: 0}
	r0.rows = append(append(r0.rows, flat(rows1[:9])...), flat(rows2)...)
	r0.cursors = append(append(r0.cursors, curs1[:9]...), curs2...)
	if err := r0.run(ctx); err != nil {
		t.Fatal(err)
	}
	if !r0.restarted || r0.gens[0] == a.Generation {
		t.Fatalf("reattach after the held batch: restarted %v, generation %d (old %d); want a restart", r0.restarted, r0.gens[0], a.Generation)
	}
	if err := <-otherErr; err != nil {
		t.Fatal(err)
	}
	if other.reattach != 0 || len(other.gens) != 1 {
		t.Errorf("rank 1 was disturbed by rank 0's restart: %d reattaches, generations %v", other.reattach, other.gens)
	}
	for i, c := range r0.cursors {
		if c.BatchIndex != uint64(i) {
			t.Fatalf("rank 0 batch %d has cursor %+v", i, c)
		}
	}
	if len(r0.cursors) != 50 || len(other.cursors) != 50 {
		t.Fatalf("%d and %d batches, want 50 each", len(r0.cursors), len(other.cursors))
	}
	checkExactlyOnce(t, "epoch with two trainer kills", append(r0.rows, other.rows...), 10000)
	e.waitJob(j.ID, 10*time.Second, "done")
}

func flat(rows [][]int64) []int64 {
	var out []int64
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

// runTrainer runs a trainer process that reads n batches of the attached
// ring, holds the last one, and is killed with SIGKILL. It returns what
// the trainer read.
func runTrainer(t *testing.T, a attachJSON, n int) ([][]int64, []shm.Cursor) {
	t.Helper()
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = childEnv("LASTMILED_HELPER=consume", "H_DIR="+a.Dir, "H_RING="+a.Ring, "H_N="+strconv.Itoa(n))
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var rows [][]int64
	var curs []shm.Cursor
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && f[0] == "HOLD" {
			break
		}
		if len(f) != 5 || f[0] != "B" {
			t.Fatalf("trainer said %q", sc.Text())
		}
		e, _ := strconv.ParseUint(f[1], 10, 64)
		i, _ := strconv.ParseUint(f[2], 10, 64)
		fl, _ := strconv.ParseUint(f[3], 10, 32)
		curs = append(curs, shm.Cursor{Epoch: e, BatchIndex: i, Flags: uint32(fl)})
		var ids []int64
		for _, s := range strings.Split(f[4], ",") {
			v, _ := strconv.ParseInt(s, 10, 64)
			ids = append(ids, v)
		}
		rows = append(rows, ids)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if len(curs) != n {
		t.Fatalf("trainer read %d batches, want %d", len(curs), n)
	}
	return rows, curs
}

// helperMain is the body of helper processes (the test binary re-executed).
func helperMain(role string) int {
	switch role {
	case "flood":
		return floodHelper()
	case "consume":
		n, _ := strconv.Atoi(os.Getenv("H_N"))
		c, err := shm.Open(os.Getenv("H_DIR"), os.Getenv("H_RING"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		w := bufio.NewWriter(os.Stdout)
		for k := 0; k < n; k++ {
			b, err := c.Next(context.Background())
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			ids := rowIDs(b)
			s := make([]string, len(ids))
			for i, v := range ids {
				s[i] = strconv.FormatInt(v, 10)
			}
			fmt.Fprintf(w, "B %d %d %d %s\n", b.Cursor.Epoch, b.Cursor.BatchIndex, b.Cursor.Flags, strings.Join(s, ","))
		}
		fmt.Fprintln(w, "HOLD")
		w.Flush()
		select {} // holding the last batch until killed
	case "request":
		return requestHelper()
	}
	fmt.Fprintln(os.Stderr, "unknown helper", role)
	return 2
}

// TestDrain sends SIGTERM mid-stream: the daemon exits within the drain
// timeout, leaves the job persisted and its ring running (not failed) for
// the next start to adopt, and the reader finishes the epoch exactly once.
// SIGHUP before it reloads what it can and names what it cannot.
func TestDrain(t *testing.T) {
	e := newEnv(t)
	e.start("-drain-timeout", "5s")
	j := e.submit(specFor("dr", smallData, ""), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := &reader{e: e, job: j.ID, delay: 5 * time.Millisecond}
	errc := make(chan error, 1)
	go func() { errc <- r.run(ctx) }()
	waitFor(t, "10 batches read", 30*time.Second, func() bool { return r.count() >= 10 })

	os.WriteFile(filepath.Join(e.dir, "lastmiled.yaml"), []byte("grace: 7m\nlog:\n  format: json\n"), 0o644)
	e.signal(syscall.SIGHUP)
	waitFor(t, "reload logged", 10*time.Second, func() bool {
		l := e.log.String()
		return strings.Contains(l, "configuration reloaded") && strings.Contains(l, "grace=7m0s") &&
			strings.Contains(l, "need a restart") && strings.Contains(l, "log.format")
	})

	start := time.Now()
	done := e.signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("lastmiled exited with %v after SIGTERM", err)
		}
	case <-time.After(6 * time.Second):
		t.Fatal("lastmiled did not exit within the drain timeout")
	}
	e.cur = nil
	t.Logf("drained in %v", time.Since(start))
	data, err := os.ReadFile(filepath.Join(e.state, "jobs", j.ID+".json"))
	if err != nil || !strings.Contains(string(data), `"state": "running"`) {
		t.Fatalf("persisted state after drain: %v\n%s", err, data)
	}
	info, err := shm.Inspect(e.shm, "lastmile.dr")
	if err != nil || info.State != shm.StateRunning || info.ProducerAlive || info.Message != "" {
		t.Fatalf("ring after drain: %+v, %v; want running, no producer, no message", info, err)
	}
	e.start()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if len(r.cursors) != 100 {
		t.Fatalf("%d batches, want 100", len(r.cursors))
	}
	checkExactlyOnce(t, "epoch across a drain", r.rows, 10000)
	for _, g := range r.gens {
		if g != r.gens[0] {
			t.Fatalf("generations %v: the ring was recreated", r.gens)
		}
	}
}

// TestEpochBoundaryCursor: a trainer that counts its cursor as (e, i+1)
// after the last batch i of epoch e (not knowing it was the last) means
// (e+1, 0); reattaching with it continues on the same ring, without a
// restart of production.
func TestEpochBoundaryCursor(t *testing.T) {
	e := newEnv(t)
	e.start()
	j := e.submit(specFor("eb", smallData, "epochs: 2\n"), nil)
	var a attachJSON
	if st, err := e.do("POST", "/v1/jobs/"+j.ID+"/attach", map[string]any{"rank": 0}, &a); err != nil || st != 200 {
		t.Fatalf("attach: %d %v", st, err)
	}
	c, err := shm.Open(a.Dir, a.Ring)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var rows []int64
	var last shm.Cursor
	for range 100 { // all of epoch 0
		b, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, rowIDs(b)...)
		last = b.Cursor
	}
	c.Close() // releases batch 99
	if last.BatchIndex != 99 || last.Flags&shm.FlagLastInEpoch == 0 {
		t.Fatalf("last batch of epoch 0: %+v", last)
	}
	checkExactlyOnce(t, "epoch 0", rows, 10000)
	var b attachJSON
	if st, err := e.do("POST", "/v1/jobs/"+j.ID+"/attach", map[string]any{"rank": 0, "cursor": cursor{0, 100}}, &b); err != nil || st != 200 {
		t.Fatalf("attach: %d %v", st, err)
	}
	switch {
	case b.Restarted:
		// The ring was full at that moment: batch 99's slot was reused, so
		// the daemon could not tell (0, 100) means (1, 0) and restarted
		// production from (0, 100), which the engine turns into (1, 0).
		t.Log("the ring was full: production restarted (correct, not optimal)")
	case b.Generation != a.Generation || b.Next == nil || *b.Next != (cursor{1, 0}):
		t.Fatalf("attach at (0, 100): %+v; want the same ring at (1, 0)", b)
	}
	r := &reader{e: e, job: j.ID, cursors: []shm.Cursor{last}}
	if err := r.run(ctx); err != nil {
		t.Fatal(err)
	}
	if len(r.cursors) != 101 || r.cursors[1] != (shm.Cursor{Epoch: 1}) {
		t.Fatalf("epoch 1: %d batches, first %+v", len(r.cursors)-1, r.cursors[1])
	}
	checkExactlyOnce(t, "epoch 1", r.rows, 10000)
}

// TestRestartWithoutInputs: a job whose inputs vanished while the daemon
// was down fails after the restart, and its surviving ring carries the
// reason instead of looking alive forever.
func TestRestartWithoutInputs(t *testing.T) {
	data := t.TempDir()
	copySmallData(t, data)
	e := newEnv(t)
	e.start()
	j := e.submit(specFor("gone", data, ""), nil)
	e.waitJob(j.ID, 10*time.Second, "running")
	e.kill9()
	os.RemoveAll(data)
	e.start()
	got := e.waitJob(j.ID, 10*time.Second, "failed")
	info, err := shm.Inspect(e.shm, "lastmile.gone")
	if err != nil || info.State != shm.StateFailed || !strings.Contains(info.Message, "lastmiled:") {
		t.Fatalf("ring after the failed restart: %+v %v (job error %q)", info, err, got.Error)
	}
}
