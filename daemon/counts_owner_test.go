package daemon

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Unit counts kept by one user's job are not reused by another user's job
// of the same spec (Daemon.countsFor). A job with share_counts keeps the
// list its trainers posted, and the daemon checks only this host's own
// share of it: the other hosts' counts are the trainers' word. Reused by
// another owner's job, a list that one user's trainer posted would deal
// that user's units, unchecked (the job then skips the exchange), so that
// its host deals them otherwise than its other hosts: ranks get different
// steps per epoch (DDP hangs) or rows twice.
func TestCountsNotSharedAcrossOwners(t *testing.T) {
	d := apiDaemon(t, nil)
	// The job is read as uids 1000 and 1001: a copy of the data they may
	// read (a checkout under a private directory they may not).
	abs := t.TempDir()
	os.Chmod(filepath.Dir(abs), 0o755)
	os.Chmod(abs, 0o755)
	if err := os.CopyFS(abs, os.DirFS("../testdata/small")); err != nil {
		t.Fatal(err)
	}
	filepath.WalkDir(abs, func(p string, _ fs.DirEntry, _ error) error { return os.Chmod(p, 0o755) })
	text := "name: cnt\ninputs: [" + abs + "]\nworld_size: 4\nbatch: {size: 100}\nring: {slots: 16}\n" +
		"pipeline:\n  - filter: \"row_id % 4 != 3\"\n"
	mallory := peer{uid: 1000, gid: 1000, ok: true}
	victim := peer{uid: 1001, gid: 1001, ok: true}
	a, _, err := d.submit(context.Background(), mallory, submitRequest{Spec: text, Hosts: 2, Host: 0, ShareCounts: true})
	if err != nil {
		t.Fatal(err)
	}
	// Mallory's run counts its share (the even units) and waits for the
	// trainers' list; her trainer posts one with her share right and the
	// other host's units made up.
	var share []int64
	waitUntil(t, "the share counted", func() bool {
		a.exchange.mu.Lock()
		defer a.exchange.mu.Unlock()
		if a.exchange.share != nil {
			share = slices.Clone(a.exchange.share.Rows)
		}
		return share != nil
	})
	bogus := slices.Clone(share)
	for i := range bogus {
		if bogus[i] < 0 {
			bogus[i] = 1 // the other host's units: one row each
		}
	}
	plan := a.exchange.share.Plan
	if err := a.exchange.post(plan, bogus, 2); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "mallory's job dealt by her list", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.unitRows) > 0
	})
	// She cancels it: the name is free, and the ended job (and its
	// counts) stay until the daemon forgets it.
	a.cancel("done with it")
	waitState(t, a, 30*time.Second, Canceled, Failed, Done)
	b, _, err := d.submit(context.Background(), victim, submitRequest{Spec: text, Hosts: 2, Host: 0, ShareCounts: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.cancel("test over")
	if b.owner == a.owner || b == a {
		t.Fatalf("the victim's submission joined mallory's job")
	}
	b.mu.Lock()
	rows := slices.Clone(b.unitRows)
	b.mu.Unlock()
	if slices.Equal(rows, bogus) {
		t.Fatalf("uid %d's job took the unit counts uid %d's trainer posted: %v", victim.uid, mallory.uid, rows)
	}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
