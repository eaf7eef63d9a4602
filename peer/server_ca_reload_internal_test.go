package peer

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestServerRevokesRemovedCAOnOpenConnections: a peer's CA bundle,
// replaced in place and reloaded (SIGHUP), verifies the requesters of
// every call after the reload, on connections made before it too. A
// handshake is verified once, and gRPC keeps a connection for as long
// as it is healthy: a requester whose CA was removed from the peer's
// bundle (compromised, or the last step of a rotation) went on having
// units computed over the connection it had, for as long as it kept it.
func TestServerRevokesRemovedCAOnOpenConnections(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	oldCA, newCA := twoCAs(t, dir)
	peerFiles, err := oldCA.IssueRole(dir, "peer", []string{"127.0.0.1"}, time.Hour, RolePeer)
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "peer-bundle.pem")
	set := func(cas ...*CA) { writeBundle(t, bundle, cas...) }
	set(oldCA)
	peerFiles.CA = bundle
	creds, err := peerFiles.Open()
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(ServerConfig{Roots: f.roots, TLS: creds.ServerTLS(), ClientCAs: creds.Roots, TrustRoot: true})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	t.Cleanup(s.Stop)
	addr := l.Addr().String()

	host, err := oldCA.IssueRole(dir, "gpu", []string{"127.0.0.1"}, time.Hour, RoleRequester)
	if err != nil {
		t.Fatal(err)
	}
	p := f.pool(host, addr)
	ctx := context.Background()
	if _, err := p.Info(ctx, addr); err != nil {
		t.Fatalf("the requester's CA in the peer's bundle: %v", err)
	}
	set(oldCA, newCA) // a reload that keeps the requester's CA keeps it
	if err := creds.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Info(ctx, addr); err != nil {
		t.Fatalf("a CA added beside the requester's: %v", err)
	}
	set(newCA)
	if err := creds.Reload(); err != nil {
		t.Fatal(err)
	}
	_, err = p.Info(ctx, addr)
	if err == nil {
		t.Fatal("the requester's CA removed from the peer's bundle, and its call over the connection made before was answered")
	}
	if st, _ := status.FromError(err); st.Code() != codes.Unauthenticated || !strings.Contains(err.Error(), "CA bundle") {
		t.Fatalf("the requester's CA removed: %v; want Unauthenticated, saying why", err)
	}
	if n := s.stats.RefusedUntrusted.Load(); n == 0 {
		t.Fatal("the refusal was not counted as untrusted")
	}
}
