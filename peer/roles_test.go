package peer

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCertificateRoles: a certificate issued for one role serves only in
// it. A peer's (serverAuth only) cannot be a requester's client
// certificate, so a CPU peer's key, on a host that parses every user's
// Parquet, cannot ask other peers for units; a requester's (clientAuth
// only) cannot serve as a peer, so a GPU host's key cannot pose as one.
// Both-role certificates (the default) work either way.
func TestCertificateRoles(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA(filepath.Join(dir, "ca"), "ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(name string, role Role) TLSFiles {
		f, err := ca.IssueRole(ca.Dir, name, []string{"127.0.0.1"}, time.Hour, role)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	// handshake returns the error of a TLS handshake between a server
	// presenting srv and a client presenting cli, as each side saw it.
	handshake := func(srv, cli TLSFiles) (serverErr, clientErr error) {
		sc, err := srv.ServerTLS()
		if err != nil {
			t.Fatal(err)
		}
		cc, err := cli.ClientTLS("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		l, err := tls.Listen("tcp", "127.0.0.1:0", sc)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		done := make(chan error, 1)
		go func() {
			c, err := l.Accept()
			if err != nil {
				done <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			done <- c.(*tls.Conn).Handshake()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d := tls.Dialer{Config: cc, NetDialer: &net.Dialer{}}
		c, err := d.DialContext(ctx, "tcp", l.Addr().String())
		if err == nil {
			// TLS 1.3: the client learns of a refused certificate on its first read.
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			var b [1]byte
			_, rerr := c.Read(b[:])
			if rerr != nil && !errors.Is(rerr, io.EOF) && !strings.Contains(rerr.Error(), "timeout") {
				err = rerr
			}
			c.Close()
		}
		return <-done, err
	}
	peerOnly, hostOnly := issue("peer", RolePeer), issue("host", RoleRequester)
	both1, both2 := issue("both1", RoleBoth), issue("both2", RoleBoth)
	for _, c := range []struct {
		name     string
		srv, cli TLSFiles
		ok       bool
	}{
		{"a peer's certificate serving a requester's", peerOnly, hostOnly, true},
		{"both-role certificates", both1, both2, true},
		{"a peer's certificate asking for units", both1, peerOnly, false},
		{"a requester's certificate serving as a peer", hostOnly, both1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			serr, cerr := handshake(c.srv, c.cli)
			if c.ok && (serr != nil || cerr != nil) {
				t.Fatalf("refused: server %v, client %v", serr, cerr)
			}
			if !c.ok && serr == nil && cerr == nil {
				t.Fatal("the handshake succeeded")
			}
			if !c.ok {
				t.Logf("server: %v; client: %v", serr, cerr)
			}
		})
	}
	if _, err := ParseRole("gpu"); err == nil || !strings.Contains(err.Error(), "want peer") {
		t.Errorf("ParseRole(gpu): %v", err)
	}
}
