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
	dir := t.TempDir()
	oldCA, err := cpupeer.NewCA(filepath.Join(dir, "old"), "old-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	newCA, err := cpupeer.NewCA(filepath.Join(dir, "new"), "new-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	peerFiles, err := oldCA.IssueRole(oldCA.Dir, "cpu", []string{"127.0.0.1"}, time.Hour, cpupeer.RolePeer)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := peerFiles.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	r, err := roots.New(map[string]string{"ctr": data})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	srv := cpupeer.NewServer(cpupeer.ServerConfig{Roots: r, TLS: tc})
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &closeSeen{Listener: inner, closed: make(chan struct{})}
	go srv.Serve(l)
	defer srv.Stop()

	host, err := oldCA.IssueRole(oldCA.Dir, "gpu", []string{"127.0.0.1"}, time.Hour, cpupeer.RoleRequester)
	if err != nil {
		t.Fatal(err)
	}
	host.CA = filepath.Join(dir, "bundle.pem")
	bundle := func(ca *cpupeer.CA) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(ca.Dir, "ca.pem"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(host.CA, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bundle(oldCA)
	cfg := DefaultConfig()
	cfg.Roots = map[string]string{"ctr": data}
	cfg.Peers = PeersConfig{Addrs: []string{l.Addr().String()}, TLS: host}
	d, err := New(cfg, nil, nil, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.startPeers(cfg); err != nil {
		t.Fatal(err)
	}
	defer d.closePeers()
	if _, err := d.pool.Info(context.Background(), l.Addr().String()); err != nil {
		t.Fatalf("the peer under its CA: %v", err)
	}
	bundle(newCA)
	d.ReloadCertificates()
	select {
	case <-l.closed:
	case <-time.After(2 * time.Second):
		t.Fatal("the idle connection to the peer of the removed CA is open 2s after SIGHUP; want it closed at once")
	}
}
