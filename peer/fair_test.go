package peer

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/lastmile/lastmile/column"
)

// connectFrom opens a connection of its own to the peer at addr, with
// files' certificate, from the loopback address local.
func connectFrom(t *testing.T, files TLSFiles, addr, local string) *remote {
	t.Helper()
	tc, err := files.ClientTLS("")
	if err != nil {
		t.Fatal(err)
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return remoteOver(addr, conn)
}

// remoteOver is the peer at addr reached over conn, a test's own.
func remoteOver(addr string, conn *grpc.ClientConn) *remote {
	return &remote{addr: addr, conns: &conns{cur: &peerConn{cc: conn, client: flight.NewClientFromConn(conn, nil)}}}
}

// TestFairShareByHost: two hosts that present the same certificate (as
// deploy/k8s's GPU hosts do) are two requesters, each with its share of
// the peer's units in flight, while one host's two connections are one
// requester with one share.
func TestFairShareByHost(t *testing.T) {
	f := newFixture(t)
	hold, free := held(t)
	s, addr := f.server(func(s *Server) {
		s.cfg.Workers, s.cfg.MaxInFlight = 6, 6
		s.slots, s.work = make(chan struct{}, 6), make(chan struct{}, 6)
		s.hook = func() { <-hold }
	})
	cert := f.ca.issue("gpu-hosts") // one certificate for both hosts
	a1 := connectFrom(t, cert, addr, "127.0.0.1")
	a2 := connectFrom(t, cert, addr, "127.0.0.1") // host a's second connection
	b := connectFrom(t, cert, addr, "127.0.0.2")
	tk := f.ticket("fair")
	held := make(chan error, 6)
	admit := func(r *remote, who string) {
		t.Helper()
		want := s.busy.Load() + 1
		go func() {
			var out column.Batch
			_, err := fetch(context.Background(), r, tk, &out)
			held <- err
		}()
		waitFor(t, who+"'s unit admitted", func() bool { return s.busy.Load() == want })
	}
	// Six slots; once both hosts have units there, each host's share is 3.
	admit(a1, "a")
	admit(b, "b")
	admit(a2, "a")
	admit(a2, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var out column.Batch
	_, err := fetch(ctx, a1, tk, &out)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "share") {
		t.Fatalf("host a's fourth unit, over two connections: %v, want ResourceExhausted for its share", err)
	}
	admit(b, "b")
	admit(b, "b")
	s.fair.mu.Lock()
	shares := len(s.fair.perClient)
	s.fair.mu.Unlock()
	if shares != 2 {
		t.Errorf("%d requesters, want 2 (one a host)", shares)
	}
	free()
	for range 6 {
		select {
		case err := <-held:
			if err != nil {
				t.Errorf("an admitted unit: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("admitted units did not finish")
		}
	}
}

// TestRequesterKey: the fair-share key is the certificate's name and the
// address without its port.
func TestRequesterKey(t *testing.T) {
	for _, c := range []struct {
		a, b requester
		same bool
	}{
		{requester{"gpu", "10.0.0.1"}, requester{"gpu", "10.0.0.1"}, true},
		{requester{"gpu", "10.0.0.1"}, requester{"gpu", "10.0.0.2"}, false},
		{requester{"gpu-1", "10.0.0.1"}, requester{"gpu-2", "10.0.0.1"}, false},
	} {
		if got := c.a.key() == c.b.key(); got != c.same {
			t.Errorf("%+v and %+v: same key %v, want %v", c.a, c.b, got, c.same)
		}
	}
}
