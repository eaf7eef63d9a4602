package peer

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// TestSilentConnectionsClosed: a peer listens on the network, and
// trusts nobody without a certificate; but a connection that never
// started its TLS handshake held one of the daemon's descriptors (and a
// goroutine) for gRPC's default connection timeout, 120 s, and the peer
// accepted any number of them (found by a review). lastmiled.service gives the daemon 65,536
// descriptors, shared with its control socket, ring files, arenas and
// every Parquet file its jobs read: a host without a certificate opening
// tens of thousands of idle connections (two source addresses' worth of
// ports) keeps the daemon out of descriptors, and its trainers' jobs
// fail, for as long as it keeps them coming. Before a client has shown a
// certificate the peer should give it a few seconds, not two minutes.
func TestSilentConnectionsClosed(t *testing.T) {
	old := handshakeTimeout
	handshakeTimeout = 500 * time.Millisecond
	t.Cleanup(func() { handshakeTimeout = old })
	f := newFixture(t)
	_, addr := f.server(nil)
	const conns = 32
	var cs []net.Conn
	for range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	time.Sleep(4 * handshakeTimeout)
	open := 0
	for _, c := range cs {
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		if errors.Is(err, os.ErrDeadlineExceeded) {
			open++ // the peer still holds it
		}
	}
	if open > 0 {
		t.Fatalf("%d of %d connections that never sent a byte are still open at the peer after %v", open, conns, 4*handshakeTimeout)
	}
}
