package peer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lastmile/lastmile/column"
	"google.golang.org/grpc/credentials"
	gpeer "google.golang.org/grpc/peer"
)

// TestTrustLogWithdrawsOnlyRemovedCAs: a reload withdraws trust (the
// count the jobs' unit caches poll grows) only when its bundle does not
// verify the chain of a peer whose units were accepted, as it was when
// they were: a leaf that expired since, under a CA the bundle keeps, is
// no withdrawal (its units were computed while it was valid), nor is a
// renewal under the same CA a second chain to keep.
func TestTrustLogWithdrawsOnlyRemovedCAs(t *testing.T) {
	dir := t.TempDir()
	ca, other := twoCAs(t, dir)
	renewed := leafOf(t, issueTo(t, ca, "peer", RolePeer, time.Hour))
	// Issued last, to be accepted well before it ends (x509 times are in
	// whole seconds: 1.5s may leave 1s) on a loaded machine.
	short := leafOf(t, issueTo(t, ca, "peer", RolePeer, 1500*time.Millisecond))
	var l trustLog
	for _, c := range []*x509.Certificate{renewed, short} { // short last: the one kept
		l.accepted(&gpeer.Peer{AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}}}})
	}
	if len(l.chains) != 1 {
		t.Errorf("%d chains kept for one peer renewed under one CA, want 1", len(l.chains))
	}
	time.Sleep(time.Until(short.NotAfter) + 100*time.Millisecond) // short has expired
	if n, _ := l.reloaded(poolOf(t, ca, other), 0); n != 0 || l.revoked.Load() != 0 {
		t.Fatalf("a reload keeping the CA withdrew %d chains (count %d): an expired leaf is no withdrawal", n, l.revoked.Load())
	}
	if n, _ := l.reloaded(poolOf(t, other), 0); n != 1 || l.revoked.Load() != 1 {
		t.Fatalf("a reload removing the CA withdrew %d chains (count %d), want 1 (1)", n, l.revoked.Load())
	}
}

// leafOf is the certificate of files.
func leafOf(t *testing.T, files TLSFiles) *x509.Certificate {
	t.Helper()
	kp, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// poolOf is a bundle of cas.
func poolOf(t *testing.T, cas ...*CA) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	for _, ca := range cas {
		b, err := os.ReadFile(filepath.Join(ca.Dir, "ca.pem"))
		if err != nil || !p.AppendCertsFromPEM(b) {
			t.Fatalf("ca %s: %v", ca.Dir, err)
		}
	}
	return p
}

// TestReloadAfterTrustedWithdraws: a unit found trusted just before the
// bundle is swapped, whose connection another call's take closes for
// distrust before CredsReloaded re-verifies (so the reload closes none),
// is a withdrawal all the same: the count grows, and the jobs' caches do
// not serve it. Before 2026-11-30's review its chain was recorded only
// after the check, too late for the reload to see it when it was the
// first unit over its issuing path, and the count stayed.
func TestReloadAfterTrustedWithdraws(t *testing.T) {
	c := newCARotation(t, nil)
	job, text := c.f.job("revoketrusted"), c.f.text("revoketrusted")
	tk := c.f.unitTicket(text, job, localPlan(t, job).Units[0])
	r := c.pool.peers[c.oldAddr]
	trustedHook = func() {
		trustedHook = nil
		writeBundle(t, c.bundle, c.newCA)
		reload(t, c.creds)
		if _, release, err := r.conns.take(); err == nil { // another spill worker's call
			release()
		}
		c.pool.CredsReloaded()
	}
	t.Cleanup(func() { trustedHook = nil })
	var out column.Batch
	if _, err := fetch(context.Background(), r, tk.Ticket, &out); err != nil {
		t.Logf("refused: %v", err)
	}
	if trustedHook != nil {
		t.Fatal("the hook did not run")
	}
	if n := c.pool.trust.revoked.Load(); n == 0 {
		t.Fatal("a unit of the peer of the removed CA, trusted as the reload was made, left the count of withdrawals at 0: the caches would serve it")
	}
}

// TestTrustLogBounded: a peer that presents other certificates beside
// its chain at each handshake (nothing in a verification needs them;
// a peer it can reconnect at will, by GOAWAY) does not grow the log
// without bound, and a reload still withdraws trust from what it could
// no longer record. Before 2026-11-30's review each such chain was a
// path of its own, kept for the daemon's life.
func TestTrustLogBounded(t *testing.T) {
	dir := t.TempDir()
	ca, other := twoCAs(t, dir)
	leaf := leafOf(t, issueTo(t, ca, "peer", RolePeer, time.Hour))
	var l trustLog
	for i := range 1000 {
		junk := &x509.Certificate{Raw: []byte{byte(i), byte(i >> 8), 'j', 'u', 'n', 'k'}}
		l.accepted(&gpeer.Peer{AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf, junk}}}})
	}
	if len(l.chains) > maxChains {
		t.Fatalf("%d chains kept for one peer's handshakes, want at most %d", len(l.chains), maxChains)
	}
	if l.reloaded(poolOf(t, ca, other), 0); l.revoked.Load() != 1 {
		t.Fatalf("a reload after the log was full left the count at %d, want 1: it cannot tell what it could not record", l.revoked.Load())
	}
	if l.reloaded(poolOf(t, ca, other), 0); l.revoked.Load() != 1 {
		t.Fatalf("a second reload keeping the CA, nothing recorded since, grew the count to %d", l.revoked.Load())
	}
}
