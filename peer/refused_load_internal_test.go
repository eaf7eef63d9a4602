package peer

import (
	"net"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// countingListener counts the connections it accepted: a TLS peer's
// handshakes.
type countingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// TestRefusedPeerProbeLoad: a peer whose certificate the requester
// refuses for good (it ended, and nobody renews it) costs each requester
// one handshake per probe, and probes certFast times a second apart,
// then ever further apart up to maxCertBackoff; and no connection or
// goroutine is left behind by the probes. Before 2026-11-30's review it
// cost 1.6 handshakes a second, forever: a probe each second over a new
// connection, and gRPC's own retries of the connection the last probe
// left failed.
func TestRefusedPeerProbeLoad(t *testing.T) {
	f := newFixture(t)
	ca, _ := twoCAs(t, t.TempDir())
	peerFiles := issueTo(t, ca, "peer", RolePeer, -30*time.Minute)
	host := issueTo(t, ca, "gpu", RoleRequester, time.Hour)
	peerFiles.CA = filepath.Join(ca.Dir, "ca.pem")
	host.CA = peerFiles.CA
	peerCreds, err := peerFiles.Open()
	if err != nil {
		t.Fatal(err)
	}
	hostCreds, err := host.Open()
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(ServerConfig{Roots: f.roots, TLS: peerCreds.ServerTLS(), ClientCAs: peerCreds.Roots, TrustRoot: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &countingListener{Listener: ln}
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	pool, err := NewPool(PoolConfig{Addrs: []string{l.Addr().String()}, TLS: hostCreds.ClientTLS(""), Roots: hostCreds.Roots})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	job, text := f.job("refusedload"), f.text("refusedload")
	tk := f.unitTicket(text, job, localPlan(t, job).Units[0])
	if ok, _ := spillOne(pool, tk.Ticket); ok {
		t.Fatal("a peer with an ended certificate answered")
	}
	// The fast probes (certFast, a second apart) are over by now.
	time.Sleep(time.Duration(certFast+1) * time.Second)
	g0, a0 := runtime.NumGoroutine(), l.n.Load()
	const window = 8 * time.Second
	time.Sleep(window)
	g1, a1 := runtime.NumGoroutine(), l.n.Load()
	t.Logf("%d handshakes in %v after the fast probes; goroutines %d, then %d", a1-a0, window, g0, g1)
	// Probes 2s, then 4s apart (each up to a fifth later): 2, or 3 if
	// the last fast one falls in the window; one more for slack.
	if n := a1 - a0; n > 4 {
		t.Errorf("%d handshakes in %v with a peer refused for good; want 4 at most", n, window)
	}
	if g1 > g0+2 {
		t.Errorf("goroutines grew from %d to %d over the probes", g0, g1)
	}
	if st := pool.Stats()[0]; st.Healthy || st.Units != 0 {
		t.Errorf("the refused peer: %+v", st)
	}
}
