package peer

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/connectivity"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/spec"
)

// caRotation is a requester whose CA bundle holds two CAs, and a peer
// of each, reached once (their connections open and idle).
type caRotation struct {
	f                *fixture
	oldCA, newCA     *CA
	bundle           string
	creds            *Creds
	pool             *Pool
	oldPeer          *Server
	oldAddr, newAddr string
}

func newCARotation(t *testing.T, oldTweak func(*Server)) *caRotation {
	t.Helper()
	c := &caRotation{f: newFixture(t)}
	dir := t.TempDir()
	c.oldCA, c.newCA = twoCAs(t, dir)
	serve := func(ca *CA, tweak func(*Server)) (*Server, string) {
		files := issueTo(t, ca, "peer", RolePeer, time.Hour)
		files.CA = filepath.Join(c.oldCA.Dir, "ca.pem") // peers trust the requester's CA
		return c.f.serverOf(files, tweak)
	}
	c.oldPeer, c.oldAddr = serve(c.oldCA, oldTweak)
	_, c.newAddr = serve(c.newCA, nil)
	host := issueTo(t, c.oldCA, "gpu", RoleRequester, time.Hour)
	c.bundle = filepath.Join(dir, "bundle.pem")
	host.CA = c.bundle
	writeBundle(t, c.bundle, c.oldCA, c.newCA)
	var err error
	if c.creds, err = host.Open(); err != nil {
		t.Fatal(err)
	}
	c.pool, err = NewPool(PoolConfig{Addrs: []string{c.oldAddr, c.newAddr}, TLS: c.creds.ClientTLS(""), Roots: c.creds.Roots})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.pool.Close)
	return c
}

// removeOldCA rewrites the bundle without the old CA and reloads it, as
// SIGHUP does.
func (c *caRotation) removeOldCA(t *testing.T) {
	t.Helper()
	writeBundle(t, c.bundle, c.newCA)
	reload(t, c.creds)
	c.pool.CredsReloaded()
}

// current is the connection the pool would use for addr now.
func (c *caRotation) current(addr string) *peerConn {
	r := c.pool.peers[addr]
	r.conns.mu.Lock()
	defer r.conns.mu.Unlock()
	return r.conns.cur
}

// TestCAReloadClosesUntrustedConnections: a requester's CA reload
// (SIGHUP) closes at once every connection whose peer the new bundle
// does not verify, idle or carrying a unit, and keeps those it does:
// the unit in flight to the peer of the removed CA fails (its spill
// worker computes it here), and no call reaches that peer again. Before
// 2026-11-30 a connection made with the old bundle stayed open until
// its peer's next call, and carried the units on it to their end: a
// removed (compromised) CA went on being trusted on it; and the
// connection to a peer that still verified was replaced for nothing.
func TestCAReloadClosesUntrustedConnections(t *testing.T) {
	for _, tc := range []struct {
		name     string
		inFlight bool // a unit on the old peer's connection at the reload
	}{
		{"idle", false},
		{"a unit in flight", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hold, free := held(t)
			c := newCARotation(t, func(s *Server) { s.hook = func() { <-hold } })
			ctx := context.Background()
			for _, a := range []string{c.oldAddr, c.newAddr} {
				if _, err := c.pool.Info(ctx, a); err != nil {
					t.Fatalf("peer %s under both CAs: %v", a, err)
				}
			}
			oldConn, newConn := c.current(c.oldAddr), c.current(c.newAddr)
			fetched := make(chan error, 1)
			if tc.inFlight {
				job, text := c.f.job("revoke"), c.f.text("revoke")
				tk := c.f.unitTicket(text, job, localPlan(t, job).Units[0])
				go func() {
					var out column.Batch
					_, err := fetch(ctx, c.pool.peers[c.oldAddr], tk.Ticket, &out)
					fetched <- err
				}()
				for c.oldPeer.InFlight() == 0 {
					time.Sleep(5 * time.Millisecond)
				}
			} else {
				free()
			}
			c.removeOldCA(t)
			if s := oldConn.cc.GetState(); s != connectivity.Shutdown {
				t.Fatalf("the connection to the peer of the removed CA is %v right after the reload; want it closed", s)
			}
			if got := c.current(c.newAddr); got != newConn || newConn.cc.GetState() == connectivity.Shutdown {
				t.Fatal("the connection to the peer the new bundle verifies was replaced or closed; want it kept")
			}
			if tc.inFlight {
				if err := <-fetched; err == nil {
					t.Fatal("the unit in flight to the peer of the removed CA was answered after the reload; want it failed")
				}
				free()
			}
			if _, err := c.pool.Info(ctx, c.oldAddr); err == nil {
				t.Fatal("the peer of the removed CA answered after the reload")
			}
			if _, err := c.pool.Info(ctx, c.newAddr); err != nil {
				t.Fatalf("the peer of the kept CA: %v", err)
			}
			if got := c.current(c.newAddr); got != newConn {
				t.Fatal("the kept connection was replaced at its next call")
			}
		})
	}
}

// TestCAReloadMidRunByteIdentical: a run spilling to the peer of a CA
// the requester removes meanwhile (SIGHUP) gives the batches of a local
// run: the units on the closed connection fail and are computed here,
// and none of that peer's is accepted after the reload.
func TestCAReloadMidRunByteIdentical(t *testing.T) {
	hold, free := held(t)
	c := newCARotation(t, func(s *Server) { s.hook = func() { <-hold } })
	job, want, sp := c.spillingJob(t, "revokerun")
	got := make(chan [][][32]byte, 1)
	go func() { got <- c.f.run(job, sp) }()
	deadline := time.Now().Add(10 * time.Second)
	for c.oldPeer.InFlight() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no unit reached the peer of the old CA in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.removeOldCA(t)
	answered := c.stats(c.oldAddr).Units
	free()
	same(t, "a run across the old CA's removal", <-got, want)
	st := c.stats(c.oldAddr)
	if st.Units != answered {
		t.Fatalf("%d units of the peer of the removed CA were accepted after the reload", st.Units-answered)
	}
	if st.Failures == 0 {
		t.Fatalf("the units on the closed connection did not fail: %+v", st)
	}
	t.Logf("spilled %d units; the old CA's peer: %d answered before the reload, %d failed", sp.Stats().Spilled.Load(), answered, st.Failures)
}

// stats is the pool's counters of the peer at addr.
func (c *caRotation) stats(addr string) PeerStats {
	for _, s := range c.pool.Stats() {
		if s.Addr == addr {
			return s
		}
	}
	return PeerStats{}
}

// TestCAReloadRefusesResultReceivedAfter: a unit whose whole stream came
// from the peer of a removed CA is not accepted once the reload has
// swapped the bundle, whether the pool had yet closed the connection
// (CredsReloaded runs after Creds.Reload, peer by peer) or had closed it
// with the stream already received (gRPC hands a closed stream's
// buffered messages to its reader). Before 2026-11-30's review both were
// accepted: the bundle was checked only when the call started.
func TestCAReloadRefusesResultReceivedAfter(t *testing.T) {
	for _, tc := range []struct {
		name  string
		close bool // the pool applied the reload (CredsReloaded) too
	}{
		{"the bundle swapped before the connection is closed", false},
		{"the connection closed with the stream received", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCARotation(t, nil)
			job, text := c.f.job("revokelate"), c.f.text("revokelate")
			tk := c.f.unitTicket(text, job, localPlan(t, job).Units[0])
			r := c.pool.peers[c.oldAddr]
			var out column.Batch
			if _, err := fetch(context.Background(), r, tk.Ticket, &out); err != nil {
				t.Fatalf("the peer of the old CA before the reload: %v", err)
			}
			receivedHook = func() {
				receivedHook = nil
				writeBundle(t, c.bundle, c.newCA)
				reload(t, c.creds)
				if tc.close {
					c.pool.CredsReloaded()
				}
			}
			t.Cleanup(func() { receivedHook = nil })
			out = column.Batch{}
			if _, err := fetch(context.Background(), r, tk.Ticket, &out); err == nil {
				t.Fatal("a unit of the peer of the removed CA, received as the reload was made, was accepted")
			} else {
				t.Logf("refused: %v", err)
			}
			if receivedHook != nil {
				t.Fatal("the hook did not run")
			}
		})
	}
}

// TestCAReloadAsUnitReceivedByteIdentical: a run across a CA removal
// made as a unit's stream has just been received whole gives the
// batches of a local run: the unit refused then (conns.trusted), its
// output already assembled, is computed here, once.
func TestCAReloadAsUnitReceivedByteIdentical(t *testing.T) {
	c := newCARotation(t, nil)
	job, want, sp := c.spillingJob(t, "revokerecv")
	var once sync.Once
	receivedHook = func() { once.Do(func() { c.removeOldCA(t) }) }
	t.Cleanup(func() { receivedHook = nil })
	same(t, "a run across the old CA's removal as a unit was received", c.f.run(job, sp), want)
	t.Logf("spilled %d units; the old CA's peer: %+v", sp.Stats().Spilled.Load(), c.stats(c.oldAddr))
}

// spillingJob returns c's fixture job name, a local run's batches of it,
// and a spiller of it that sends every unit it can to c's pool.
func (c *caRotation) spillingJob(t *testing.T, name string) (*spec.Job, [][][32]byte, *Spiller) {
	t.Helper()
	job, text := c.f.job(name), c.f.text(name)
	want := c.f.run(job, nil)
	cfg := SpillerConfig{}
	cfg.Policy.Always = true
	sp, err := testSpiller(c.pool, c.f.roots, text, job, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return job, want, sp
}
