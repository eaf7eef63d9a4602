package peer

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/backoff"

	"github.com/lastmile/lastmile/column"
)

// renewInPlace issues ca's certificate for name, valid for validity,
// and writes it and its key over files' (a renewal in place).
func renewInPlace(t *testing.T, ca *CA, name string, role Role, validity time.Duration, files TLSFiles) {
	t.Helper()
	next, err := ca.IssueRole(t.TempDir(), name, []string{"127.0.0.1"}, validity, role)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range [][2]string{{next.Cert, files.Cert}, {next.Key, files.Key}} {
		b, err := os.ReadFile(p[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRenewedPeerUsedAgain: a peer refused at the handshake for a
// certificate (its own ended, or signed by a CA the requester lacks, or
// the requester's ended) gets units again within 3s of the renewal that
// fixes it, on either side (within 7s of a peer's renewal once the
// refusals' probes are 4-5s apart: refusedBackoff), after an outage
// that grew gRPC's own reconnection backoff (here a minute, as a few
// minutes' outage leaves it). Before 2026-11-30 it took about 60s: a probe of a failed peer
// reused its connection, which attempted no handshake while gRPC's
// backoff ran (the probe failed with the handshake error gRPC had kept,
// "latest balancer error"), and the pool's exclusion, grown to 30s, came
// on top.
func TestRenewedPeerUsedAgain(t *testing.T) {
	was := connectParams
	connectParams.Backoff = backoff.Config{BaseDelay: time.Minute, Multiplier: 1, MaxDelay: time.Minute}
	t.Cleanup(func() { connectParams = was })
	type sides struct {
		oldCA, newCA         *CA
		peer, host           TLSFiles
		peerCreds, hostCreds *Creds
		pool                 *Pool
	}
	for _, tc := range []struct {
		name string
		// setup returns the peer's and the requester's files, broken so
		// that the handshake is refused.
		setup func(t *testing.T, s *sides)
		// renew fixes them, as an operator does, and sends SIGHUP.
		renew func(t *testing.T, s *sides)
		// late: renewed once the fast probes are over (refusedBackoff),
		// and then seen within 7s rather than 3s.
		late bool
	}{
		{"the peer's ended certificate renewed",
			func(t *testing.T, s *sides) {
				s.peer = issueTo(t, s.oldCA, "peer", RolePeer, -30*time.Minute)
				s.host = issueTo(t, s.oldCA, "gpu", RoleRequester, time.Hour)
			},
			func(t *testing.T, s *sides) {
				renewInPlace(t, s.oldCA, "peer", RolePeer, time.Hour, s.peer)
				reload(t, s.peerCreds)
			}, false},
		{"the peer's ended certificate renewed after the fast probes",
			func(t *testing.T, s *sides) {
				s.peer = issueTo(t, s.oldCA, "peer", RolePeer, -30*time.Minute)
				s.host = issueTo(t, s.oldCA, "gpu", RoleRequester, time.Hour)
			},
			func(t *testing.T, s *sides) {
				renewInPlace(t, s.oldCA, "peer", RolePeer, time.Hour, s.peer)
				reload(t, s.peerCreds)
			}, true},
		{"the requester's ended certificate renewed",
			func(t *testing.T, s *sides) {
				s.peer = issueTo(t, s.oldCA, "peer", RolePeer, time.Hour)
				s.host = issueTo(t, s.oldCA, "gpu", RoleRequester, -30*time.Minute)
			},
			func(t *testing.T, s *sides) {
				renewInPlace(t, s.oldCA, "gpu", RoleRequester, time.Hour, s.host)
				reload(t, s.hostCreds)
				s.pool.CredsReloaded() // as lastmiled's SIGHUP does
			}, false},
		{"the peer's CA added to the requester's bundle",
			func(t *testing.T, s *sides) {
				s.peer = issueTo(t, s.newCA, "peer", RolePeer, time.Hour)
				s.host = issueTo(t, s.oldCA, "gpu", RoleRequester, time.Hour)
			},
			func(t *testing.T, s *sides) {
				writeBundle(t, s.host.CA, s.oldCA, s.newCA)
				reload(t, s.hostCreds)
				s.pool.CredsReloaded()
			}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			s := &sides{}
			s.oldCA, s.newCA = twoCAs(t, t.TempDir())
			tc.setup(t, s)
			s.peer.CA = filepath.Join(s.oldCA.Dir, "ca.pem") // the peer trusts the requester's CA
			s.host.CA = filepath.Join(t.TempDir(), "bundle.pem")
			writeBundle(t, s.host.CA, s.oldCA)
			var err error
			if s.peerCreds, err = s.peer.Open(); err != nil {
				t.Fatal(err)
			}
			if s.hostCreds, err = s.host.Open(); err != nil {
				t.Fatal(err)
			}
			srv := NewServer(ServerConfig{Roots: f.roots, TLS: s.peerCreds.ServerTLS(), ClientCAs: s.peerCreds.Roots, TrustRoot: true})
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go srv.Serve(l)
			t.Cleanup(srv.Stop)
			s.pool, err = NewPool(PoolConfig{Addrs: []string{l.Addr().String()}, TLS: s.hostCreds.ClientTLS(""), Roots: s.hostCreds.Roots})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.pool.Close)
			job, text := f.job("renew"), f.text("renew")
			tk := f.unitTicket(text, job, localPlan(t, job).Units[0])

			// The outage: units and probes refused, for long enough that
			// a probe has failed after the first unit.
			outage, within := 2500*time.Millisecond, 3*time.Second
			if tc.late {
				outage, within = time.Duration(certFast+4)*time.Second, 7*time.Second
			}
			end := time.Now().Add(outage)
			for time.Now().Before(end) {
				if ok, err := spillOne(s.pool, tk.Ticket); ok {
					t.Fatalf("a unit was answered before the renewal (%v)", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			tc.renew(t, s)
			renewed := time.Now()
			var last error
			for time.Since(renewed) < within {
				ok, err := spillOne(s.pool, tk.Ticket)
				if ok {
					t.Logf("a unit answered %v after the renewal", time.Since(renewed).Round(time.Millisecond))
					return
				}
				if err != nil {
					last = err
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Fatalf("no unit answered within %v of the renewal; last error %v; peer %+v", within, last, s.pool.Stats())
		})
	}
}

// issueTo issues ca's certificate for name, valid for validity (ended
// if negative), in a directory of its own.
func issueTo(t *testing.T, ca *CA, name string, role Role, validity time.Duration) TLSFiles {
	t.Helper()
	files, err := ca.IssueRole(t.TempDir(), name, []string{"127.0.0.1"}, validity, role)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func reload(t *testing.T, c *Creds) {
	t.Helper()
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
}

// spillOne sends ticket to the peer the pool picks, as a spill worker
// does; ok: one was picked and answered.
func spillOne(p *Pool, ticket []byte) (ok bool, err error) {
	r := p.pick("")
	if r == nil {
		return false, nil
	}
	var out column.Batch
	start := time.Now()
	got, err := fetch(context.Background(), r, ticket, &out)
	p.done(r, time.Since(start), 0, got, err)
	return err == nil, err
}
