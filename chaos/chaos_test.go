// Package chaos_test is lastmile's chaos suite: real lastmiled processes
// and real Python trainers (lastmile.Dataset), with seeded random faults,
// checked row by row. It also holds the soak (soak_test.go).
//
// # The promise under test
//
// A job of E epochs over N rows (datagen's table: row_id is 0..N-1 and every
// other value is a pure function of the seed and the row id) delivers, for
// every epoch e < E, every row id exactly once across all ranks, with the
// values datagen computes for it, whatever happens to the processes in
// between. "Delivered" means *recorded by a trainer*: a trainer that is
// killed loses what it had not recorded, and must get exactly that again.
//
// # The trainer's side of exactly-once
//
// testdata/trainer.py appends a batch's rows to rankR.rows, then renames a
// new rankR.state over the old one holding the Dataset's state_dict (the
// cursor of the next batch) and the length of rankR.rows that it covers.
// The rename is the commit. A restarted trainer truncates rankR.rows to the
// committed length and loads the committed state_dict, so the recorded
// rows are exactly the rows of the batches before the committed cursor.
// Any loss or repetition the check finds is lastmile's (daemon or client),
// not the harness's.
//
// # The fault model
//
// One fault at a time, at a random moment (50 to 700 ms apart), chosen by
// a seeded generator:
//
//   - kill9-daemon: SIGKILL lastmiled, wait 0 to 300 ms, start it again on
//     the same socket, state and shm directories. Trainers see their
//     producer die, wait for the daemon, attach with their cursors. One
//     time in three the new daemon is killed again 0 to 150 ms after it
//     was started (while it reloads jobs and adopts rings), and started
//     once more: two faults.
//   - kill9-trainer: SIGKILL one rank's trainer (mid-batch, mid-commit,
//     wherever it is), start it again; it resumes from its committed state.
//   - stop-cont: SIGSTOP the daemon or one trainer for 50 ms to 1.5 s, then
//     SIGCONT. Nothing may be lost or declared dead for a pause.
//   - shm-full: the shm directory is a small tmpfs (mounted by the test; it
//     needs root, and is skipped with a message otherwise) filled up before
//     a job starts. The job must fail with a clear error saying that space
//     ran out, not hang; once space is free again the daemon serves a new
//     job exactly.
//   - input-corrupt: one input file is overwritten with garbage in the
//     middle, truncated, or removed while the job reads. Either the job
//     fails with an error naming the file (an "error seen", whose rows
//     before it must still be correct and unrepeated), or the daemon had
//     already read that file and the job completes exactly. With
//     -chaos.bitflip, one byte of a column chunk the job reads is flipped
//     with the file's size and mtime kept, as silent corruption on disk
//     would be: only page CRCs can tell, and lastmile does not check them
//     yet (docs/reliability.md), so this finds wrong values.
//
// Faults compose: a trainer may be killed while the daemon is down, the
// daemon killed while a trainer resumes, and any of them hit an epoch's
// end or the job's end. The times are random, so a seed reproduces the
// schedule of faults (which, where, how long), not the exact interleaving.
//
// # What is counted
//
// For each run: the rows lost (an epoch's row id never recorded), the rows
// repeated (recorded more than once in an epoch, across ranks), rows with
// wrong values (a cat_0 or dense_0 other than datagen's), and errors seen
// (runs whose job failed with a clear error, as an input fault may
// rightly cause). Any lost, repeated or wrong row, any unclear error, any
// trainer failing in a run without input faults, and any hang fails the
// test. The last line of the output is the summary:
//
//	chaos: seed S, runs N, faults F (kill9-daemon a, kill9-trainer b, stop-cont c, shm-full d, input-corrupt e), rows lost 0, rows repeated 0, errors seen E
//
// Hosts runs split a world between two lastmileds (torchrun --nnodes 2),
// each serving its own ranks from its share of the units, with a filter
// that makes each host count the rows every unit keeps and batch.last: pad
// so that none is dropped; the faults above hit either host's daemon, and
// every kept row of every epoch must be recorded exactly once across the
// world (hosts_test.go).
//
// go test ./chaos/ runs the short version (four runs, a few faults, under
// a minute); make chaos runs the full one (-chaos.full: at least
// -chaos.faults faults); -chaos.seed=S reproduces a run's schedule.
package chaos_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

var (
	chaosSeed   = flag.Uint64("chaos.seed", 0, "seed of the first run (0: from the clock); run i uses seed+i")
	chaosRuns   = flag.Int("chaos.runs", 4, "runs at least this many runs (seeds seed..seed+runs-1; by the seed modulo 4: 0 a process run with a CPU peer, 1 a hosts run, 2 a process run, 3 an input run)")
	chaosFull   = flag.Bool("chaos.full", false, "the full suite: longer jobs, more faults per run")
	chaosPeers  = flag.Bool("chaos.peers", true, "process runs of seeds 0 modulo 4 spill every unit they can to a CPU peer daemon, which faults may kill or stop")
	chaosFaults = flag.Int("chaos.faults", 50, "with -chaos.full: keep running until this many faults were injected")
)

// tally counts over all runs; summary prints it.
type tally struct {
	mu                                          sync.Mutex
	seed                                        uint64
	runs, kill9d, kill9t, stopCont, shmFull, in int
	peer                                        int // kill -9 or SIGSTOP of a CPU peer
	lost, repeated, wrong, errors               int
}

func (c *tally) faults() int { return c.kill9d + c.kill9t + c.stopCont + c.shmFull + c.in + c.peer }

func (c *tally) summary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := fmt.Sprintf("chaos: seed %d, runs %d, faults %d (kill9-daemon %d, kill9-trainer %d, stop-cont %d, shm-full %d, input-corrupt %d, peer %d), rows lost %d, rows repeated %d, errors seen %d",
		c.seed, c.runs, c.faults(), c.kill9d, c.kill9t, c.stopCont, c.shmFull, c.in, c.peer, c.lost, c.repeated, c.errors)
	if c.wrong > 0 {
		s += fmt.Sprintf(", rows with wrong values %d", c.wrong)
	}
	return s
}

// TestChaos runs one shm-full run, then the runs: process faults, or input
// faults for one seed in four; then prints the summary, failed or not.
func TestChaos(t *testing.T) {
	needPython(t)
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano()%1_000_000) + 1
	}
	c := &tally{seed: seed}
	t.Logf("chaos: seed %d (reproduce with -chaos.seed=%d)", seed, seed)
	t.Cleanup(func() { fmt.Println(c.summary()) })
	data := sharedData(t)
	t.Run("shm-full", func(t *testing.T) { shmFullRun(t, c, seed) })
	for i := 0; i < *chaosRuns || *chaosFull && c.faults() < *chaosFaults; i++ {
		runSeed := seed + uint64(i)
		rng := rand.New(rand.NewPCG(runSeed, 0x6c6d))
		kind, run := "process", processRun
		switch runSeed % 4 {
		case 1:
			kind, run = "hosts", hostsRun
		case 3:
			kind, run = "input", inputRun
		}
		ok := t.Run(fmt.Sprintf("%s-seed-%d", kind, runSeed), func(t *testing.T) { run(t, c, rng, runSeed, data) })
		if !ok {
			t.Logf("the run with seed %d failed: reproduce its schedule with -chaos.seed=%d -chaos.runs=1", runSeed, runSeed)
			return
		}
	}
}
