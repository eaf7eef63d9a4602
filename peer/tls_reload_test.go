package peer

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCredsReload: certificates renewed in place (new contents under the
// same paths) are presented from the next handshake after Reload, by a
// peer and by a requester, without a restart; files that do not load
// leave the last good ones in use. Before 2026-11-29 a daemon read its
// certificates once, and a renewal took a restart that nothing said was
// needed: once the old ones expired, every spill failed.
func TestCredsReload(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA(filepath.Join(dir, "ca"), "ca", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(name string, valid time.Duration) TLSFiles {
		d := filepath.Join(dir, name+valid.String())
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		f, err := ca.Issue(d, name, []string{"127.0.0.1"}, valid)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	// place copies f's certificate and key over to's (the files renewed).
	place := func(f, to TLSFiles) {
		for _, p := range [][2]string{{f.Cert, to.Cert}, {f.Key, to.Key}} {
			b, err := os.ReadFile(p[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p[1], b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	peerFiles, hostFiles := issue("peer", time.Hour), issue("host", time.Hour)
	peerCreds, err := peerFiles.Open()
	if err != nil {
		t.Fatal(err)
	}
	hostCreds, err := hostFiles.Open()
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", peerCreds.ServerTLS())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	seen := make(chan time.Time, 1) // the client certificate's NotAfter, as the peer saw it
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			tc := c.(*tls.Conn)
			if err := tc.Handshake(); err == nil {
				seen <- tc.ConnectionState().PeerCertificates[0].NotAfter
			} else {
				seen <- time.Time{}
			}
			c.Close()
		}
	}()
	// dial returns the NotAfter of the peer's and of the host's
	// certificate as the other side saw them.
	dial := func() (time.Time, time.Time) {
		t.Helper()
		c, err := tls.Dial("tcp", l.Addr().String(), hostCreds.ClientTLS("127.0.0.1"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].NotAfter, <-seen
	}
	near := func(a, b time.Time) bool { return a.Sub(b).Abs() < time.Minute }
	p1, h1 := dial()
	if !near(p1, peerCreds.NotAfter()) || !near(h1, hostCreds.NotAfter()) {
		t.Fatalf("first handshake: peer %v, host %v; want %v, %v", p1, h1, peerCreds.NotAfter(), hostCreds.NotAfter())
	}

	place(issue("peer", 3*time.Hour), peerFiles)
	place(issue("host", 5*time.Hour), hostFiles)
	if p, h := dial(); !near(p, p1) || !near(h, h1) {
		t.Fatalf("before Reload: peer %v, host %v; want the first certificates", p, h)
	}
	if err := peerCreds.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := hostCreds.Reload(); err != nil {
		t.Fatal(err)
	}
	p2, h2 := dial()
	if !near(p2, p1.Add(2*time.Hour)) || !near(h2, h1.Add(4*time.Hour)) {
		t.Fatalf("after Reload: peer %v, host %v; want the renewed certificates (%v, %v)", p2, h2, p1.Add(2*time.Hour), h1.Add(4*time.Hour))
	}

	if err := os.WriteFile(peerFiles.Key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := peerCreds.Reload(); err == nil {
		t.Fatal("Reload took a file that is not a key")
	}
	if p, _ := dial(); !near(p, p2) {
		t.Fatalf("after a failed Reload: peer %v; want the last good certificate %v", p, p2)
	}
}

// TestCredsReloadRefusesExpiredCertificate: a certificate that has
// already ended (an old file put back, a renewal gone wrong) is not
// taken by Reload: the one in use, still good, stays. Taken, every
// handshake after it would fail, on a reload that said it succeeded.
func TestCredsReloadRefusesExpiredCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA(filepath.Join(dir, "ca"), "ca", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	good, err := ca.Issue(t.TempDir(), "peer", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := good.Open()
	if err != nil {
		t.Fatal(err)
	}
	end := creds.NotAfter()
	old, err := ca.Issue(t.TempDir(), "peer", []string{"127.0.0.1"}, -30*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range [][2]string{{old.Cert, good.Cert}, {old.Key, good.Key}} {
		b, err := os.ReadFile(p[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := creds.Reload(); err == nil {
		t.Fatalf("Reload took a certificate that ended at %v", creds.NotAfter())
	}
	if !creds.NotAfter().Equal(end) {
		t.Fatalf("after a refused Reload the certificate ends %v; want the one in use (%v)", creds.NotAfter(), end)
	}
}
