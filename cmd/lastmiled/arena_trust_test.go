package main_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/lastmile/lastmile/shm"
)

// A ring's owner may write its header (0600, theirs), so the daemon never
// learns which arena to chown from a ring: it chowns the arena its run
// created, through its descriptor (Progress.ChownArena). Here user 41001
// points their ring at root's job's arena, and the daemon restarts (their
// ring is adopted): root's arena, root's decoded rows, stays root's.
func TestArenaChownIgnoresUserWrittenHeader(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to submit as another uid")
	}
	e := newEnv(t)
	e.start("-socket-mode", "0666")
	u := newAsUser(t, e)
	dir, _ := accessTree(t, e)
	public := filepath.Join(dir, "public")
	spec := func(name string) string {
		return fmt.Sprintf("name: %s\ninputs: [%s]\ncolumns: [row_id]\nbatch: {size: 100}\nepochs: 0\nring: {slots: 4, arena: true}\n", name, public)
	}
	arenas := func() []string { m, _ := filepath.Glob(filepath.Join(e.shm, "arena+*")); return m }
	owner := func(p string) uint32 {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Uid
	}

	// The victim: root's job.
	var v jobJSON
	if st, err := e.do("POST", "/v1/jobs", map[string]any{"spec": spec("victim")}, &v); err != nil || st != 201 {
		t.Fatalf("submit victim: %d %v", st, err)
	}
	e.waitJob(v.ID, 10*time.Second, "running")
	waitFor(t, "the victim's arena", 10*time.Second, func() bool { return len(arenas()) == 1 })
	victim := arenas()[0]
	vb, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	vid, vsize := binary.LittleEndian.Uint64(vb[8:]), binary.LittleEndian.Uint64(vb[16:])
	if owner(victim) != 0 {
		t.Fatalf("victim arena owned by %d, want root", owner(victim))
	}

	// The attacker: uid 41001's job, whose ring is theirs.
	code, body := u.submit(spec("atk"))
	if code != 201 {
		t.Fatalf("submit atk: %d %s", code, body)
	}
	var a jobJSON
	json.Unmarshal([]byte(body), &a)
	got := e.waitJob(a.ID, 10*time.Second, "running")
	waitFor(t, "the attacker's rings", 10*time.Second, func() bool { got = e.job(a.ID); return len(got.Rings) == 1 && len(arenas()) == 2 })
	ring := filepath.Join(e.shm, got.Rings[0].Name)
	waitFor(t, "the attacker's ring given to them", 10*time.Second, func() bool { return owner(ring) == accessUID })
	// What uid 41001 may do to its own 0600 ring: name the victim's arena
	// in line 0 (arena_id at 88, arena_size at 96, §8.1).
	f, err := os.OpenFile(ring, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ref [16]byte
	binary.LittleEndian.PutUint64(ref[0:], vid)
	binary.LittleEndian.PutUint64(ref[8:], vsize)
	if _, err := f.WriteAt(ref[:], 88); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if h, err := shm.Inspect(e.shm, got.Rings[0].Name); err != nil {
		t.Fatalf("the edited ring still parses: %v", err)
	} else {
		t.Logf("attacker ring %s state %v", h.Name, h.State)
	}

	// A restart: the daemon adopts the attacker's ring and runs onReady.
	e.kill9()
	e.start("-socket-mode", "0666")
	e.waitJob(a.ID, 10*time.Second, "running")
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && owner(victim) == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	if o := owner(victim); o != 0 {
		t.Errorf("root's job's arena %s is now owned by uid %d: the daemon chowned the file a user's ring header named", filepath.Base(victim), o)
	}
}

// The daemon removes the arenas its job record names (daemon/jobrings.go),
// never one a ring's header names: user 41001, naming root's job's arena
// in their own ring, does not have the daemon unlink it when their job's
// rings are removed (here: reclaimed after the grace period with no
// trainer); root's trainers still open their ring.
func TestArenaRemoveIgnoresUserWrittenHeader(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to submit as another uid")
	}
	e := newEnv(t)
	os.WriteFile(filepath.Join(e.dir, "lastmiled.yaml"), []byte("grace: 1s\n"), 0o644)
	e.start("-socket-mode", "0666")
	u := newAsUser(t, e)
	dir, _ := accessTree(t, e)
	public := filepath.Join(dir, "public")
	spec := func(name string) string {
		return fmt.Sprintf("name: %s\ninputs: [%s]\ncolumns: [row_id]\nbatch: {size: 100}\nepochs: 0\nring: {slots: 4, arena: true}\n", name, public)
	}
	arenas := func() []string { m, _ := filepath.Glob(filepath.Join(e.shm, "arena+*")); return m }

	var v jobJSON
	if st, err := e.do("POST", "/v1/jobs", map[string]any{"spec": spec("victim")}, &v); err != nil || st != 201 {
		t.Fatalf("submit victim: %d %v", st, err)
	}
	waitFor(t, "the victim's ring", 10*time.Second, func() bool { v = e.job(v.ID); return len(v.Rings) == 1 && len(arenas()) == 1 })
	// Root's trainer, attached: the victim job is not reclaimed.
	c, err := shm.Open(e.shm, v.Rings[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	victim := arenas()[0]
	vb, _ := os.ReadFile(victim)
	vid, vsize := binary.LittleEndian.Uint64(vb[8:]), binary.LittleEndian.Uint64(vb[16:])

	code, body := u.submit(spec("atk"))
	if code != 201 {
		t.Fatalf("submit atk: %d %s", code, body)
	}
	var a jobJSON
	json.Unmarshal([]byte(body), &a)
	waitFor(t, "the attacker's ring", 10*time.Second, func() bool { a = e.job(a.ID); return len(a.Rings) == 1 && len(arenas()) == 2 })
	ring := filepath.Join(e.shm, a.Rings[0].Name)
	f, err := os.OpenFile(ring, os.O_RDWR, 0) // the attacker's own 0600 file
	if err != nil {
		t.Fatal(err)
	}
	var ref [16]byte
	binary.LittleEndian.PutUint64(ref[0:], vid)
	binary.LittleEndian.PutUint64(ref[8:], vsize)
	f.WriteAt(ref[:], 88)
	f.Close()

	waitFor(t, "the attacker's ring reclaimed", 15*time.Second, func() bool { _, err := os.Stat(ring); return os.IsNotExist(err) })
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("root's running job's arena: %v: removed with uid %d's rings, whose header named it", err, accessUID)
	}
	if c2, err := shm.Open(e.shm, v.Rings[0].Name); err == nil {
		c2.Close()
	} else {
		t.Logf("opening the victim's ring now: %v", err)
	}
}

// A daemon killed mid-job restarts and adopts the job's rings, which keep
// naming the first run's arena; the arena the new run made, which no ring
// names, is removed at once (engine settleArenas), and the first run's,
// in the job's record, goes with the rings: nothing is left in /dev/shm.
func TestArenaRestartLeavesNoArena(t *testing.T) {
	e := newEnv(t)
	e.start()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	spec := fmt.Sprintf("name: arena\ninputs: [%s]\nbatch: {size: 100}\nworld_size: 2\nshuffle: {units: true}\nring: {slots: 4, arena: true}\n", smallData)
	j := e.submit(spec, nil)
	readers := []*reader{{e: e, job: j.ID, rank: 0, delay: 3 * time.Millisecond}, {e: e, job: j.ID, rank: 1, delay: 3 * time.Millisecond}}
	wait := startReaders(ctx, readers)
	waitFor(t, "10 batches read", 30*time.Second, func() bool { return readers[0].count()+readers[1].count() >= 10 })
	e.kill9()
	time.Sleep(300 * time.Millisecond)
	e.start()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	e.waitJob(j.ID, 10*time.Second, "done")
	waitFor(t, "rings removed", 10*time.Second, func() bool {
		m, _ := filepath.Glob(filepath.Join(e.shm, "lastmile.*"))
		return len(m) == 0
	})
	time.Sleep(500 * time.Millisecond)
	if left, _ := filepath.Glob(filepath.Join(e.shm, "*")); len(left) > 0 {
		t.Errorf("left in the shm directory after the job's rings were removed: %v", left)
	}
}

// A daemon killed after it created a job's unit arena but before the
// rings were handed over (Ready: an OOM kill while large rings are
// pre-faulted) still removes the arena once the job is done: its id was
// recorded before the file existed.
func TestArenaKilledBeforeReady(t *testing.T) {
	e := newEnv(t)
	e.start()
	// Rings of 2 × 4 slots of 128 MiB: creating them takes long enough
	// to be killed during it.
	spec := fmt.Sprintf("name: arena\ninputs: [%s]\nbatch: {size: 100}\nworld_size: 2\nring: {slots: 4, slot_size: 128MiB, arena: true}\n", smallData)
	j := e.submit(spec, nil)
	var arena []string
	waitFor(t, "the arena created", 30*time.Second, func() bool {
		arena, _ = filepath.Glob(filepath.Join(e.shm, "arena+*"))
		return len(arena) > 0
	})
	e.kill9()
	rings, _ := filepath.Glob(filepath.Join(e.shm, "lastmile.*"))
	t.Logf("killed with %v and rings %v in place", arena, rings)
	e.start()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	readers := []*reader{{e: e, job: j.ID, rank: 0}, {e: e, job: j.ID, rank: 1}}
	if err := startReaders(ctx, readers)(); err != nil {
		t.Fatal(err)
	}
	e.waitJob(j.ID, 10*time.Second, "done")
	e.waitShmEmpty("the rings and arenas removed", 10*time.Second)
}
