package peer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lastmile/lastmile/asuser"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
	"github.com/parquet-go/parquet-go"
)

// TestPeerReadsAsTheUser: a peer opens a spilled unit's file and its
// job's side tables as the user the ticket names (the submitter), so its
// kernel decides what it reads for them, as the GPU host's did.
//
// Before, a peer read them with its own (root's) credentials: bob, who
// owns a directory beneath a data root, submitted a job joining against
// his own table there, then replaced it with a symlink to alice's file
// (0600 in a 0700 directory beneath the same root) once the GPU host had
// loaded it, before the peer compiled the job (he times that himself: a
// trainer that does not read keeps spill off). The peer followed the link
// (it stays beneath the root) and joined against alice's keys: every row
// bob's ring lost named one of them.
//
// bob's input is part-00001 and his table part-00002 (no key in common),
// so his anti join keeps every row; alice's table holds every other key
// of part-00001.
func TestPeerReadsAsTheUser(t *testing.T) {
	const bob = 65534
	bobFS := decode.Local(asuser.FS{Cred: asuser.Cred{UID: bob, GID: bob}})
	f := newBobFixture(t)
	bobDir := filepath.Join(f.data, "bob")
	os.Mkdir(bobDir, 0o755)
	os.Chown(bobDir, bob, bob)
	side := filepath.Join(bobDir, "side.parquet")
	copyAs(t, filepath.Join(f.data, "part-00002.parquet"), side, bob)
	aliceDir := filepath.Join(f.data, "alice")
	os.Mkdir(aliceDir, 0o700)
	secret := filepath.Join(aliceDir, "secret.parquet")
	writeHalfKeys(t, filepath.Join(f.data, "part-00001.parquet"), secret)
	if _, err := bobFS.Open(secret); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("bob opens alice's table: %v, want permission denied", err)
	}

	job, text := f.antiJoin(t, "sidetable", 2, 50, side, filepath.Join(f.data, "part-00001.parquet"))
	// What lastmiled checks at submission, as bob: accepted.
	if err := engine.Check(context.Background(), job, nil, bobFS); err != nil {
		t.Fatalf("bob's job, checked as bob: %v", err)
	}
	want := f.runAs(job, nil, bobFS)
	spill := func() *Spiller {
		_, addr := f.server(nil)
		cfg := SpillerConfig{User: &User{UID: bob, GID: bob}}
		cfg.Policy.Always = true
		sp, err := NewSpiller(f.pool(f.ca.issue("gpu-host"), addr), f.roots, text, job, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return sp
	}

	// What bob may read, a peer reads for him.
	sp := spill()
	same(t, "spilled as bob", f.runAs(job, sp, bobFS), want)
	if sp.Stats().Spilled.Load() == 0 {
		t.Fatalf("no unit of bob's readable job was spilled (fallbacks %d)", sp.Stats().Fallbacks.Load())
	}

	// bob swaps his table for a link to alice's once the GPU host has
	// loaded it: here, just before a fresh peer compiles the job.
	var swap sync.Once
	compileHook = func() {
		swap.Do(func() {
			os.Remove(side)
			symlinkAs(t, "../alice/secret.parquet", side, bob)
		})
	}
	t.Cleanup(func() { compileHook = nil })
	sp = spill()
	got := f.runAs(job, sp, bobFS)
	t.Logf("spilled %d units, %d ran here after the peer refused", sp.Stats().Spilled.Load(), sp.Stats().Fallbacks.Load())
	same(t, "bob's job after the swap (a peer joining against "+secret+", which he may not read, would drop rows)", got, want)
	if sp.Stats().Spilled.Load() != 0 {
		t.Errorf("%d units spilled: the peer computed bob's job against a table he may not read", sp.Stats().Spilled.Load())
	}
}

// writeHalfKeys writes to path (0600, root's) every other row_id of the
// Parquet file from.
func writeHalfKeys(t *testing.T, from, path string) {
	t.Helper()
	type key struct {
		RowID int64 `parquet:"row_id"`
	}
	keys, err := parquet.ReadFile[key](from)
	if err != nil {
		t.Fatal(err)
	}
	var half []key
	for i, k := range keys {
		if i%2 == 0 {
			half = append(half, k)
		}
	}
	if err := parquet.WriteFile(path, half); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

// copyAs copies from to to, 0644 and owned by uid.
func copyAs(t *testing.T, from, to string, uid int) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(to, uid, uid); err != nil {
		t.Fatal(err)
	}
}

// symlinkAs makes the symlink name → target, owned by uid.
func symlinkAs(t *testing.T, target, name string, uid int) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Error(err)
		return
	}
	os.Lchown(name, uid, uid)
}

// TestPeerSquashesRoot: a ticket for uid 0 is read for as Nobody unless
// the peer trusts root. Whoever holds a requester's certificate may name
// any user in a ticket; without the squash, naming root read every file
// beneath the peer's roots with the peer's own rights. A file only root
// may read is refused (PermissionDenied, counted) and the requester runs
// the units itself, with the same batches; a peer that trusts root
// computes them.
func TestPeerSquashesRoot(t *testing.T) {
	f := newBobFixture(t)
	secret := filepath.Join(f.data, "part-00001.parquet")
	if err := os.Chmod(secret, 0o600); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf("version: 1\nname: rootjob\ninputs: [%s]\nbatch: {size: 10, last: keep}\nseed: 1\nring: {slots: 4, dir: %s}\ndecode: {max_unit_rows: 50, workers: 1}\n", secret, f.shm)
	job, err := spec.Parse("", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := f.run(job, nil)
	for _, trust := range []bool{false, true} {
		t.Run(fmt.Sprintf("trust_root=%v", trust), func(t *testing.T) {
			s, addr := f.server(func(s *Server) { s.cfg.TrustRoot = trust })
			cfg := SpillerConfig{User: &User{UID: 0, GID: 0}}
			cfg.Policy.Always = true
			sp, err := NewSpiller(f.pool(f.ca.issue("gpu-host"), addr), f.roots, text, job, cfg)
			if err != nil {
				t.Fatal(err)
			}
			same(t, "root's job", f.run(job, sp), want)
			spilled, refused := sp.Stats().Spilled.Load(), s.stats.RefusedPermission.Load()
			if trust && (spilled == 0 || refused != 0) {
				t.Fatalf("a peer trusting root: %d units spilled, %d refused; want all spilled", spilled, refused)
			}
			if !trust && (spilled != 0 || refused == 0) {
				t.Fatalf("a peer squashing root: %d units spilled, %d refused; want none spilled, the file read for nobody refused", spilled, refused)
			}
		})
	}
}

// TestPeerSquashesRootGroup: a ticket naming a non-zero uid with gid 0,
// or group 0 among its groups, does not read a file that only root and
// the root group may read (0640 root:root): gid 0 is squashed with uid 0
// unless the peer trusts root, as an NFS server's root_squash maps both.
// Without it, whoever holds a requester's certificate names uid 1, gid 0
// and reads what the squash of uid 0 keeps from them.
func TestPeerSquashesRootGroup(t *testing.T) {
	f := newBobFixture(t)
	secret := filepath.Join(f.data, "part-00001.parquet")
	if err := os.Chown(secret, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(secret, 0o640); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf("version: 1\nname: groupjob\ninputs: [%s]\nbatch: {size: 10, last: keep}\nseed: 1\nring: {slots: 4, dir: %s}\ndecode: {max_unit_rows: 50, workers: 1}\n", secret, f.shm)
	job, err := spec.Parse("", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := f.run(job, nil)
	for _, c := range []struct {
		name string
		user User
	}{
		{"gid 0", User{UID: 4242, GID: 0}},
		{"group 0", User{UID: 4242, GID: 4242, Groups: []uint32{4242, 0}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, addr := f.server(func(s *Server) { s.cfg.TrustRoot = false })
			cfg := SpillerConfig{User: &c.user}
			cfg.Policy.Always = true
			sp, err := NewSpiller(f.pool(f.ca.issue("gpu-host"), addr), f.roots, text, job, cfg)
			if err != nil {
				t.Fatal(err)
			}
			same(t, "the job", f.run(job, sp), want)
			if spilled, refused := sp.Stats().Spilled.Load(), s.stats.RefusedPermission.Load(); spilled != 0 || refused == 0 {
				t.Fatalf("%+v: %d units spilled, %d refused; want none spilled, the root group's file refused", c.user, spilled, refused)
			}
		})
	}
}
