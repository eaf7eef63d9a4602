package daemon

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	cpupeer "github.com/lastmile/lastmile/peer"
	"github.com/lastmile/lastmile/roots"
)

// caReload is a GPU host's daemon with one CPU peer, for the tests of a
// SIGHUP that replaced the host's peers.tls CA bundle. Two CAs: old
// signed the host's certificate (and the peer trusts it), and the peer's
// certificate is signed by old or new. The host's bundle starts as old's
// alone; bundle writes it anew.
type caReload struct {
	old, new *cpupeer.CA
	d        *Daemon
	addr     string
	path     string // the host's CA bundle
}

// newCAReload starts the peer (its certificate signed by new when
// peerOfNew, else by old), serving on the listener wrap returns (nil:
// as it is), and the host's daemon with that peer.
func newCAReload(t *testing.T, peerOfNew bool, wrap func(net.Listener) net.Listener) *caReload {
	t.Helper()
	dir := t.TempDir()
	f := &caReload{path: filepath.Join(dir, "bundle.pem")}
	var err error
	if f.old, err = cpupeer.NewCA(filepath.Join(dir, "old"), "old-ca", time.Hour); err != nil {
		t.Fatal(err)
	}
	if f.new, err = cpupeer.NewCA(filepath.Join(dir, "new"), "new-ca", time.Hour); err != nil {
		t.Fatal(err)
	}
	signer := f.old
	if peerOfNew {
		signer = f.new
	}
	peerFiles, err := signer.IssueRole(signer.Dir, "cpu", []string{"127.0.0.1"}, time.Hour, cpupeer.RolePeer)
	if err != nil {
		t.Fatal(err)
	}
	peerFiles.CA = filepath.Join(f.old.Dir, "ca.pem") // the peer trusts the GPU host's CA
	tc, err := peerFiles.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	r, err := roots.New(map[string]string{"ctr": data})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	srv := cpupeer.NewServer(cpupeer.ServerConfig{Roots: r, TLS: tc})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		l = wrap(l)
	}
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	f.addr = l.Addr().String()

	host, err := f.old.IssueRole(f.old.Dir, "gpu", []string{"127.0.0.1"}, time.Hour, cpupeer.RoleRequester)
	if err != nil {
		t.Fatal(err)
	}
	host.CA = f.path
	f.bundle(t, f.old)
	cfg := DefaultConfig()
	cfg.Roots = map[string]string{"ctr": data}
	cfg.Peers = PeersConfig{Addrs: []string{f.addr}, TLS: host}
	if f.d, err = New(cfg, nil, nil, "test", nil); err != nil {
		t.Fatal(err)
	}
	if err := f.d.startPeers(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.d.closePeers)
	return f
}

// bundle writes the host's CA bundle: the certificates of cas.
func (f *caReload) bundle(t *testing.T, cas ...*cpupeer.CA) {
	t.Helper()
	var b []byte
	for _, ca := range cas {
		c, err := os.ReadFile(filepath.Join(ca.Dir, "ca.pem"))
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, c...)
	}
	if err := os.WriteFile(f.path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReloadTrustsNewCA: a GPU host's peers.tls CA bundle replaced in
// place is applied by SIGHUP (ReloadCertificates): a peer whose
// certificate a CA added to the bundle signed is reached without a
// restart. Before 2026-11-29 the requester verified peers with the
// bundle it started with, and the new CA took a restart.
func TestReloadTrustsNewCA(t *testing.T) {
	f := newCAReload(t, true, nil)
	ctx := context.Background()
	if _, err := f.d.pool.Info(ctx, f.addr); err == nil {
		t.Fatal("a peer of a CA outside the bundle was reached")
	}
	f.bundle(t, f.old, f.new)
	f.d.ReloadCertificates()
	if _, err := f.d.pool.Info(ctx, f.addr); err != nil {
		t.Fatalf("after SIGHUP with the new CA in the bundle: %v; want the peer reached", err)
	}
}

// closeSeen is a listener whose accepted connections say when the
// server closes them (gRPC closes its side once the client closed its).
type closeSeen struct {
	net.Listener
	closed chan struct{}
	once   sync.Once
}

func (l *closeSeen) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &seenConn{Conn: c, l: l}, nil
}

type seenConn struct {
	net.Conn
	l *closeSeen
}

func (c *seenConn) Close() error {
	c.l.once.Do(func() { close(c.l.closed) })
	return c.Conn.Close()
}

// TestReloadClosesRemovedCAConnections: SIGHUP (ReloadCertificates) on
// a GPU host whose peers.tls CA bundle no longer holds the CA of a
// peer closes its idle connection to that peer at once. Until
// 2026-11-30 the connection stayed open until the peer's next call.
func TestReloadClosesRemovedCAConnections(t *testing.T) {
	var seen *closeSeen
	f := newCAReload(t, false, func(l net.Listener) net.Listener {
		seen = &closeSeen{Listener: l, closed: make(chan struct{})}
		return seen
	})
	if _, err := f.d.pool.Info(context.Background(), f.addr); err != nil {
		t.Fatalf("the peer under its CA: %v", err)
	}
	f.bundle(t, f.new)
	f.d.ReloadCertificates()
	select {
	case <-seen.closed:
	case <-time.After(2 * time.Second):
		t.Fatal("the idle connection to the peer of the removed CA is open 2s after SIGHUP; want it closed at once")
	}
}
