package peer

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/lastmile/lastmile/column"
)

// syncBuffer is a buffer a slog handler writes from gRPC's goroutines
// while a test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// logTo is a server tweak that logs into buf, Debug and up.
func logTo(buf *syncBuffer) func(*Server) {
	return func(s *Server) {
		s.log = slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

// handshakeCounts is the refused handshakes a server counted, by reason.
func handshakeCounts(s *Server) map[string]int64 {
	st := s.Stats()
	return map[string]int64{ReasonNoCertificate: st.RefusedNoCert.Load(), ReasonUntrusted: st.RefusedUntrusted.Load(),
		ReasonHandshake: st.RefusedHandshake.Load(), ReasonNoHello: st.RefusedNoHello.Load()}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// caPool is the pool of the fixture's CA, for clients that trust the
// peer without presenting a certificate of their own.
func caPool(t *testing.T, f *fixture) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(f.ca.issue("ca-reader").CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return pool
}

// TestHandshakeRefusals: a client with no certificate, one whose
// certificate another CA signed, a plaintext client and a connection
// that closes at once are refused during the handshake, each counted by
// its reason and logged with its address and error; a client with a
// certificate the CA signed gets its unit, and nothing is counted.
func TestHandshakeRefusals(t *testing.T) {
	f := newFixture(t)
	tk := f.ticket("handshakes")
	other := newTestCA(t, t.TempDir(), "other-ca")
	stranger := other.issue("stranger")
	stranger.CA = f.ca.issue("x").CA // it trusts the peer; the peer does not trust it
	strangerTLS, err := stranger.ClientTLS("")
	if err != nil {
		t.Fatal(err)
	}
	// A Go client given Certificates sends none that the CAs the peer
	// names did not sign (that is the "no certificate" case); ClientTLS
	// presents its certificate whatever the peer names (GetClientCertificate).
	if strangerTLS.GetClientCertificate == nil {
		t.Fatal("ClientTLS does not present its certificate through GetClientCertificate")
	}
	good, err := f.ca.issue("gpu-host").ClientTLS("")
	if err != nil {
		t.Fatal(err)
	}
	// A requester that dials a name the peer's certificate does not carry
	// (lastmile certs without that address in -hosts) refuses the peer's
	// certificate: the peer sees a remote alert, and its hint must point
	// at its own certificate, not at the requester's TLS setup.
	wrongName, err := f.ca.issue("gpu-host").ClientTLS("not-this-peer.example")
	if err != nil {
		t.Fatal(err)
	}
	tlsCreds := func(c *tls.Config) grpc.DialOption { return grpc.WithTransportCredentials(credentials.NewTLS(c)) }
	for _, c := range []struct {
		name   string
		dial   grpc.DialOption // nil: open a TCP connection and close it
		reason string          // "": served
		level  string
		err    string // in the logged error
		hint   string // in the logged hint, if set
	}{
		{"no certificate", tlsCreds(&tls.Config{RootCAs: caPool(t, f)}), ReasonNoCertificate, "WARN", "didn't provide a certificate", ""},
		{"another CA", tlsCreds(strangerTLS), ReasonUntrusted, "WARN", "certificate signed by unknown authority", ""},
		{"plaintext", grpc.WithTransportCredentials(insecure.NewCredentials()), ReasonHandshake, "WARN", "does not look like a TLS handshake", ""},
		{"closed at once", nil, ReasonNoHello, "DEBUG", "EOF", ""},
		{"the requester refuses the peer's certificate", tlsCreds(wrongName), ReasonHandshake, "WARN", "bad certificate",
			"the requester refused this peer's certificate"},
		{"certificate the CA signed", tlsCreds(good), "", "", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs syncBuffer
			s, addr := f.server(logTo(&logs))
			err := callOnce(t, addr, c.dial, tk)
			if c.reason == "" {
				if err != nil {
					t.Fatalf("a good client: %v", err)
				}
				if n := handshakeCounts(s); n[ReasonNoCertificate]+n[ReasonUntrusted]+n[ReasonHandshake]+n[ReasonNoHello] != 0 {
					t.Errorf("a good client counted as refused: %v", n)
				}
				if strings.Contains(logs.String(), "refused") {
					t.Errorf("a good client logged as refused:\n%s", logs.String())
				}
				return
			}
			if err == nil {
				t.Fatal("served a unit")
			}
			waitFor(t, c.reason+" counted", func() bool { return handshakeCounts(s)[c.reason] > 0 })
			for reason, n := range handshakeCounts(s) {
				if reason != c.reason && n != 0 {
					t.Errorf("counted %d as %s, want only %s", n, reason, c.reason)
				}
			}
			waitFor(t, "the log line", func() bool { return strings.Contains(logs.String(), "refused a TLS handshake") })
			line := logs.String()
			for _, want := range []string{"level=" + c.level, "reason=" + c.reason, "addr=127.0.0.1:", c.err, c.hint} {
				if !strings.Contains(line, want) {
					t.Errorf("log line lacks %q:\n%s", want, line)
				}
			}
			if s.Stats().Units.Load() != 0 {
				t.Errorf("served %d units", s.Stats().Units.Load())
			}
		})
	}
}

// callOnce asks the peer at addr for tk's unit over a connection of its
// own, closed after, and returns the call's error; a nil dial opens a
// TCP connection and closes it without a byte.
func callOnce(t *testing.T, addr string, dial grpc.DialOption, tk []byte) error {
	t.Helper()
	if dial == nil {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		return net.ErrClosed
	}
	conn, err := grpc.NewClient(addr, dial)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := remoteOver(addr, conn)
	var out column.Batch
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = fetch(ctx, r, tk, &out)
	return err
}

// TestHandshakeLogRateLimited: refused handshakes are all counted, but a
// burst is logged once a second a reason, the next line saying how many
// it stands for.
func TestHandshakeLogRateLimited(t *testing.T) {
	f := newFixture(t)
	var logs syncBuffer
	s, addr := f.server(logTo(&logs))
	client := &tls.Config{RootCAs: caPool(t, f), ServerName: "127.0.0.1"}
	for range 5 {
		c, err := tls.Dial("tcp", addr, client) // TLS 1.3: the client is done first
		if err == nil {
			c.Close()
		}
	}
	waitFor(t, "5 refusals", func() bool { return s.Stats().RefusedNoCert.Load() == 5 })
	if n := strings.Count(logs.String(), "refused a TLS handshake"); n != 1 {
		t.Errorf("%d log lines for a burst of 5, want 1:\n%s", n, logs.String())
	}

	var l logEvery
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		key  string
		at   time.Duration
		ok   bool
		held int64
	}{
		{"a", 0, true, 0},
		{"a", 300 * time.Millisecond, false, 0},
		{"b", 400 * time.Millisecond, true, 0}, // another reason is not held back
		{"a", 900 * time.Millisecond, false, 0},
		{"a", time.Second, true, 2},
		{"a", 1500 * time.Millisecond, false, 0},
		{"a", 3 * time.Second, true, 1},
	} {
		if ok, held := l.allow(c.key, t0.Add(c.at)); ok != c.ok || held != c.held {
			t.Errorf("%s at %v: allowed %v, %d held; want %v, %d", c.key, c.at, ok, held, c.ok, c.held)
		}
	}
}
