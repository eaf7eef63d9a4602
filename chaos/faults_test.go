package chaos_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lastmile/lastmile/datagen"
)

// dataset is a run's input: datagen rows in Parquet files.
type dataset struct {
	dir  string
	rows int64
	g    *datagen.Generator
}

const dataRows = 6000 // 60 batches of 100: divisible by 1, 2 and 3 ranks

// sharedData is the input of the process runs, which only read it.
func sharedData(t *testing.T) dataset {
	dir, g := genData(t, workDir(t, "chaos-data"), dataRows, 4, "zstd", 5)
	return dataset{dir, dataRows, g}
}

// job is one run: a daemon, a job of epochs over data, and its trainers.
type job struct {
	t        *testing.T
	data     dataset
	d        *daemon
	peer     *daemon // a CPU peer d spills to, or nil
	trainers []*trainer
	epochs   int
	// hosts are the daemons of a world split between hosts (d is the one
	// faults hit next); nil for one host.
	hosts []*daemon
	// keep says which rows the job's filter keeps; nil: every row.
	keep func(id int64) bool
}

// startDaemon starts a daemon in a new directory with shm as its shm
// directory ("": one inside it).
func startDaemon(t *testing.T, shm string) *daemon {
	dir := workDir(t, "chaos-run")
	if shm == "" {
		shm = filepath.Join(dir, "shm")
	}
	d := newDaemon(t, dir, shm)
	d.start()
	return d
}

// newJob starts world trainers (1 to 3, drawn) that submit a job of epochs
// (0: 1 or 2, drawn) to d and read it, pacing themselves so that the job
// lasts about dur.
func newJob(t *testing.T, d *daemon, rng *rand.Rand, seed uint64, data dataset, dur time.Duration, epochs int) *job {
	if epochs == 0 {
		epochs = 1 + rng.IntN(2)
	}
	j := &job{t: t, data: data, d: d, epochs: epochs}
	dir := filepath.Join(d.dir, fmt.Sprintf("job-%d", seed))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	world := 1 + rng.IntN(3)
	perRank := int(data.rows) / 100 / world * j.epochs
	// A third of the jobs decode into the unit arena (ring format 4.2):
	// whole row groups, rows in their units' order.
	layout := "shuffle: {units: true, buffer: 1000}\nring: {slots: 4}\ndecode: {max_unit_rows: 500}\n"
	if rng.IntN(3) == 0 {
		layout = "shuffle: {units: true}\nring: {slots: 4, arena: true}\n"
	}
	spec := fmt.Sprintf("version: 1\nname: chaos-%d\ninputs: [%s]\ncolumns: [row_id, cat_0, dense_0]\nbatch: {size: 100}\n"+
		"world_size: %d\nepochs: %d\nseed: %d\n%s",
		seed, data.dir, world, j.epochs, seed, layout)
	for r := range world {
		tr := newTrainer(t, dir, r, map[string]any{"spec": spec, "world_size": world, "socket": d.sock,
			"delay": dur.Seconds() / float64(perRank)})
		tr.start()
		j.trainers = append(j.trainers, tr)
	}
	t.Logf("world size %d, %d epochs of %d rows, %d batches per rank, unit arena %v", world, j.epochs, data.rows, perRank,
		strings.Contains(layout, "arena"))
	return j
}

func (j *job) running() (rs []*trainer) {
	for _, tr := range j.trainers {
		if tr.running() {
			rs = append(rs, tr)
		}
	}
	return rs
}

// wait waits for every trainer to stop; a trainer still running after
// timeout is a hang, and fails the run.
func (j *job) wait(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for len(j.running()) > 0 {
		if time.Now().After(deadline) {
			var b []string
			for _, tr := range j.running() {
				b = append(b, fmt.Sprintf("rank %d (%d batches recorded)", tr.rank, tr.batches()))
			}
			j.fail("hang: %s still running after %v", strings.Join(b, ", "), timeout)
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// fail fails the run with the logs of the daemon and the trainers.
func (j *job) fail(format string, args ...any) {
	j.t.Helper()
	var b strings.Builder
	for _, tr := range j.trainers {
		fmt.Fprintf(&b, "\n--- rank %d log:\n%s", tr.rank, tail(tr.logText(), 3000))
	}
	for h, d := range j.hosts {
		if d != j.d {
			fmt.Fprintf(&b, "\n--- host %d's daemon log:\n%s", h, tail(d.logText(), 4000))
		}
	}
	j.t.Errorf(format+"%s\n--- daemon log:\n%s", append(args, b.String(), tail(j.d.logText(), 6000))...)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// processRun injects process faults into one job and checks that it
// completes with every row of every epoch recorded exactly once.
func processRun(t *testing.T, c *tally, rng *rand.Rand, seed uint64, data dataset) {
	dur, faults := 2*time.Second, 3
	if *chaosFull {
		dur, faults = 6*time.Second, 5
	}
	var d, peer *daemon
	if *chaosPeers && seed%4 == 0 {
		d, peer = startWithPeer(t, data)
	} else {
		d = startDaemon(t, "")
	}
	j := newJob(t, d, rng, seed, data, dur, 0)
	j.peer = peer
	j.faults(c, rng, faults, func() {})
	if !j.finish(c) {
		return
	}
	if peer != nil {
		t.Logf("the peer computed %d units of the job (since its last restart)", peer.servedUnits())
	}
}

// faults injects n faults, 50 to 700 ms apart, each after before (which
// may pick the daemon it hits), while a trainer runs.
func (j *job) faults(c *tally, rng *rand.Rand, n int, before func()) {
	for i := 0; i < n; i++ {
		time.Sleep(time.Duration(50+rng.IntN(650)) * time.Millisecond)
		if len(j.running()) == 0 {
			return
		}
		before()
		j.inject(c, rng)
	}
}

// finish waits for the trainers, checks that each ended well and that
// every row was recorded exactly once, and counts the run; false where
// the run failed.
func (j *job) finish(c *tally) bool {
	if !j.wait(3 * time.Minute) {
		return false
	}
	for _, tr := range j.trainers {
		if e, _ := tr.end(); !e.OK {
			j.fail("rank %d failed: %s", tr.rank, e.Error)
			return false
		}
	}
	j.check(c, true)
	c.mu.Lock()
	c.runs++
	c.mu.Unlock()
	return !j.t.Failed()
}

// inject applies one fault drawn from rng and counts it.
func (j *job) inject(c *tally, rng *rand.Rand) {
	kind, pick, pause := rng.IntN(3), rng.IntN(8), time.Duration(rng.IntN(300))*time.Millisecond
	if j.peer != nil && rng.IntN(3) == 0 {
		j.peerFault(c, pick, pause)
		return
	}
	rs := j.running()
	switch {
	case kind == 0 && pick < 3:
		// killed again while starting: adopting rings, reloading jobs
		early := time.Duration(rng.IntN(150)) * time.Millisecond
		j.t.Logf("fault: kill9-daemon, down %v, killed again %v after its start", pause, early)
		j.d.kill9()
		time.Sleep(pause)
		j.d.spawn()
		time.Sleep(early)
		j.d.kill9()
		j.d.start()
		c.count(&c.kill9d)
		c.count(&c.kill9d)
	case kind == 0:
		j.t.Logf("fault: kill9-daemon, down %v", pause)
		j.d.kill9()
		time.Sleep(pause)
		j.d.start()
		c.count(&c.kill9d)
	case kind == 1:
		tr := rs[pick%len(rs)]
		j.t.Logf("fault: kill9-trainer rank %d (after %d batches recorded), down %v", tr.rank, tr.batches(), pause)
		tr.kill9()
		time.Sleep(pause)
		tr.start()
		c.count(&c.kill9t)
	default:
		pause = time.Duration(50+rng.IntN(1450)) * time.Millisecond
		pid, who := j.d.pid(), "daemon"
		if pick%2 == 1 {
			tr := rs[pick/2%len(rs)]
			pid, who = tr.cmd.Process.Pid, fmt.Sprintf("rank %d", tr.rank)
		}
		j.t.Logf("fault: stop-cont %s for %v", who, pause)
		syscall.Kill(pid, syscall.SIGSTOP)
		time.Sleep(pause)
		syscall.Kill(pid, syscall.SIGCONT)
		c.count(&c.stopCont)
	}
}

func (c *tally) count(n *int) {
	c.mu.Lock()
	*n++
	c.mu.Unlock()
}

// startWithPeer starts a CPU peer over data's directory and a daemon that
// spills every unit it can to it (docs/peers.md), plaintext on loopback.
func startWithPeer(t *testing.T, data dataset) (d, peer *daemon) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	pdir := workDir(t, "chaos-peer")
	peer = newDaemon(t, pdir, filepath.Join(pdir, "shm"))
	peer.config = filepath.Join(pdir, "lastmiled.yaml")
	os.WriteFile(peer.config, []byte(fmt.Sprintf("roots: {data: %s}\npeer: {listen: %q, insecure: true, trust_root: true}\n", data.dir, addr)), 0o644)
	peer.start()
	dir := workDir(t, "chaos-run")
	d = newDaemon(t, dir, filepath.Join(dir, "shm"))
	d.config = filepath.Join(dir, "lastmiled.yaml")
	os.WriteFile(d.config, []byte(fmt.Sprintf("roots: {data: %s}\npeers: {addrs: [%q], insecure: true, spill: always, credits: 2, deadline: 2s}\n",
		data.dir, addr)), 0o644)
	d.start()
	return d, peer
}

// peerFault kills the CPU peer with SIGKILL and restarts it after pause,
// or stops it for a while: its units run locally after their deadline.
func (j *job) peerFault(c *tally, pick int, pause time.Duration) {
	if pick < 4 {
		j.t.Logf("fault: kill9-peer, down %v", pause)
		j.peer.kill9()
		time.Sleep(pause)
		j.peer.start()
	} else {
		pause = time.Duration(500+pick*300) * time.Millisecond
		j.t.Logf("fault: stop-cont peer for %v", pause)
		syscall.Kill(j.peer.pid(), syscall.SIGSTOP)
		time.Sleep(pause)
		syscall.Kill(j.peer.pid(), syscall.SIGCONT)
	}
	c.count(&c.peer)
}

// servedUnits is how many units d has computed as a CPU peer since it
// started, -1 if it does not answer.
func (d *daemon) servedUnits() int64 {
	resp, err := d.client.Get("http://lastmiled/v1/status")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var st struct {
		Peers struct{ Served struct{ Units int64 } }
	}
	if json.NewDecoder(resp.Body).Decode(&st) != nil {
		return -1
	}
	return st.Peers.Served.Units
}
