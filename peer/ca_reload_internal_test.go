package peer

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/connectivity"

	"github.com/lastmile/lastmile/column"
)

// TestPoolReloadsCA: a requester's CA bundle, replaced in place and
// reloaded (SIGHUP), verifies the peers of every call after the reload:
// a peer whose CA was added is reached, one whose CA was removed is not,
// although the requester has a connection to it made before, which is
// closed with the unit in flight on it (its spill worker computes it
// here). Until 2026-11-30 that unit finished on the connection, and the
// connection was closed after it. Before 2026-11-29 a requester verified peers with the CA
// bundle it started with until it restarted: a CA added for a rotation
// was not trusted, and one removed (compromised) still was.
func TestPoolReloadsCA(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	oldCA, newCA := twoCAs(t, dir)
	issue := func(ca *CA, name string, role Role) TLSFiles {
		t.Helper()
		files, err := ca.IssueRole(ca.Dir, name, []string{"127.0.0.1"}, time.Hour, role)
		if err != nil {
			t.Fatal(err)
		}
		files.CA = filepath.Join(oldCA.Dir, "ca.pem") // peers trust the requester's CA
		return files
	}
	serve := func(files TLSFiles, delay time.Duration) (*Server, string) {
		t.Helper()
		tc, err := files.ServerTLS()
		if err != nil {
			t.Fatal(err)
		}
		s := NewServer(ServerConfig{Roots: f.roots, TLS: tc, TrustRoot: true})
		s.delay = delay
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go s.Serve(l)
		t.Cleanup(s.Stop)
		return s, l.Addr().String()
	}
	slowOld, oldAddr := serve(issue(oldCA, "peer-old", RolePeer), 2*time.Second)
	_, newAddr := serve(issue(newCA, "peer-new", RolePeer), 0)

	host := issue(oldCA, "gpu", RoleRequester)
	host.CA = filepath.Join(dir, "host-ca.pem")
	setBundle := func(cas ...*CA) { writeBundle(t, host.CA, cas...) }
	setBundle(oldCA)
	creds, err := host.Open()
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPool(PoolConfig{Addrs: []string{oldAddr, newAddr}, TLS: creds.ClientTLS(""), Roots: creds.Roots})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	reach := func(addr string, want bool, when string) {
		t.Helper()
		_, err := p.Info(ctx, addr)
		if want && err != nil {
			t.Fatalf("%s: peer %s: %v; want it reached", when, addr, err)
		}
		if !want && (err == nil || !strings.Contains(err.Error(), "certificate")) {
			t.Fatalf("%s: peer %s: %v; want its certificate refused", when, addr, err)
		}
	}
	reach(oldAddr, true, "the old CA")
	reach(newAddr, false, "the old CA")

	setBundle(oldCA, newCA)
	if err := creds.Reload(); err != nil {
		t.Fatal(err)
	}
	reach(newAddr, true, "the new CA added")
	reach(oldAddr, true, "the new CA added")

	// A unit in flight on the old peer's connection while the old CA is
	// removed.
	job, text := f.job("careload"), f.text("careload")
	tk := f.unitTicket(text, job, localPlan(t, job).Units[0])
	r := p.peers[oldAddr]
	r.conns.mu.Lock()
	before := r.conns.cur
	r.conns.mu.Unlock()
	fetched := make(chan error, 1)
	go func() {
		var out column.Batch
		_, err := fetch(ctx, r, tk.Ticket, &out)
		fetched <- err
	}()
	for slowOld.InFlight() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	setBundle(newCA)
	if err := creds.Reload(); err != nil {
		t.Fatal(err)
	}
	// No Pool.CredsReloaded here: the peer's next call applies the
	// reload (conns.use), and closes the connection with the unit on it.
	reach(oldAddr, false, "the old CA removed, a unit in flight")
	if s := before.cc.GetState(); s != connectivity.Shutdown {
		t.Fatalf("the connection made with the old CA is %v after the peer's next call; want it closed", s)
	}
	reach(newAddr, true, "the old CA removed")
	if err := <-fetched; err == nil {
		t.Fatal("the unit in flight as the CA was removed was answered; want it failed (computed here)")
	}
}
