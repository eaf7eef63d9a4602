package daemon

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	cpupeer "github.com/lastmile/lastmile/peer"
	"github.com/lastmile/lastmile/roots"
)

// TestReloadTrustsNewCA: a GPU host's peers.tls CA bundle replaced in
// place is applied by SIGHUP (ReloadCertificates): a peer whose
// certificate a CA added to the bundle signed is reached without a
// restart. Before 2026-11-29 the requester verified peers with the
// bundle it started with, and the new CA took a restart.
func TestReloadTrustsNewCA(t *testing.T) {
	dir := t.TempDir()
	oldCA, err := cpupeer.NewCA(filepath.Join(dir, "old"), "old-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	newCA, err := cpupeer.NewCA(filepath.Join(dir, "new"), "new-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	peerFiles, err := newCA.IssueRole(newCA.Dir, "cpu", []string{"127.0.0.1"}, time.Hour, cpupeer.RolePeer)
	if err != nil {
		t.Fatal(err)
	}
	peerFiles.CA = filepath.Join(oldCA.Dir, "ca.pem") // the peer trusts the GPU host's CA
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
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Stop()

	host, err := oldCA.IssueRole(oldCA.Dir, "gpu", []string{"127.0.0.1"}, time.Hour, cpupeer.RoleRequester)
	if err != nil {
		t.Fatal(err)
	}
	host.CA = filepath.Join(dir, "bundle.pem")
	bundle := func(cas ...*cpupeer.CA) {
		t.Helper()
		var b []byte
		for _, ca := range cas {
			c, err := os.ReadFile(filepath.Join(ca.Dir, "ca.pem"))
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, c...)
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
	ctx := context.Background()
	if _, err := d.pool.Info(ctx, l.Addr().String()); err == nil {
		t.Fatal("a peer of a CA outside the bundle was reached")
	}
	bundle(oldCA, newCA)
	d.ReloadCertificates()
	if _, err := d.pool.Info(ctx, l.Addr().String()); err != nil {
		t.Fatalf("after SIGHUP with the new CA in the bundle: %v; want the peer reached", err)
	}
}
