package peer

import (
	"crypto/x509"
	"errors"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
)

// A requester's connections and its CA bundle.
//
// A requester verifies peers with a CA bundle that SIGHUP may replace
// (Creds.Reload): a CA added for a rotation, or one removed because it
// must no longer be trusted. gRPC copies a connection's tls.Config when
// the connection is made, and crypto/tls offers a client no hook to pick
// its roots per handshake; so each connection (peerConn) is bound to the
// bundle it was made with, and a peer's connection made with another
// bundle than PoolConfig.Roots returns now is replaced at its next use:
//
//  1. use compares the connection's bundle with Roots() (the same
//     *x509.CertPool while the bundle's contents are unchanged);
//  2. if they differ, it makes a new connection with the new bundle (gRPC
//     connects lazily: the handshake is the first call's), and retires
//     the old one;
//  3. the calls already on the old connection (units streaming back,
//     probes) finish there: closing it would cancel them, and they would
//     count as the peer's failures. It is closed when the last is done.
//
// So no call starts on a connection verified with a bundle the requester
// no longer holds; one made before the reload carries only the calls
// that were on it then. A connection nobody uses after the reload stays
// open, unused, until its peer's next call or gRPC's idle timeout.
//
// Rejected: verifying by hand (InsecureSkipVerify and a VerifyConnection
// that checks the chain against the current bundle) puts the check of
// every peer's identity in our code; transport credentials that take the
// bundle at each handshake leave the connections made before a reload in
// use for as long as they stay healthy (gRPC keeps one indefinitely), so
// a CA removed from the bundle went on being trusted on them.

// peerConn is one gRPC connection to a peer, whose handshakes verify the
// peer with the CA bundle roots.
type peerConn struct {
	cc     *grpc.ClientConn
	client flight.Client
	roots  *x509.CertPool // nil: PoolConfig.TLS's own, or plaintext
	users  int            // calls on it now: units and probes
	// retired: replaced, or its peer left the pool; closed once users
	// is 0.
	retired bool
}

// conns is a peer's connection, replaced when the CA bundle changes.
type conns struct {
	mu   sync.Mutex
	cur  *peerConn   // nil once closed
	old  []*peerConn // retired, with calls on them still
	dial func(roots *x509.CertPool) (*peerConn, error)
	// roots returns the bundle a new connection verifies the peer with;
	// nil: PoolConfig.TLS's, never replaced.
	roots func() *x509.CertPool
}

var errConnClosed = errors.New("the peer left the pool")

func newConns(dial func(*x509.CertPool) (*peerConn, error), roots func() *x509.CertPool) (*conns, error) {
	c := &conns{dial: dial, roots: roots}
	var first *x509.CertPool
	if roots != nil {
		first = roots()
	}
	cur, err := dial(first)
	if err != nil {
		return nil, err
	}
	c.cur = cur
	return c, nil
}

// use returns the client for one call to the peer, and the func to call
// once the call is over (its stream read to its end, or canceled). A
// connection made with another CA bundle than the one in force is
// replaced first.
func (c *conns) use() (flight.Client, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		return nil, nil, errConnClosed
	}
	if c.roots != nil {
		if now := c.roots(); now != c.cur.roots {
			next, err := c.dial(now)
			if err != nil {
				return nil, nil, err
			}
			c.retireLocked(c.cur)
			c.cur = next
		}
	}
	pc := c.cur
	pc.users++
	return pc.client, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if pc.users--; pc.retired && pc.users == 0 {
			pc.cc.Close()
			c.old = slices.DeleteFunc(c.old, func(o *peerConn) bool { return o == pc })
		}
	}, nil
}

func (c *conns) retireLocked(pc *peerConn) {
	pc.retired = true
	if pc.users == 0 {
		pc.cc.Close()
	} else {
		c.old = append(c.old, pc)
	}
}

// close retires the connection: closed now if no call is on it,
// otherwise when the last ends. Calls after close fail.
func (c *conns) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != nil {
		c.retireLocked(c.cur)
		c.cur = nil
	}
}

// shut closes every connection now, canceling the calls on them (the
// pool is closing). Calls after shut fail.
func (c *conns) shut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pc := range c.old {
		pc.cc.Close()
	}
	if c.cur != nil {
		c.cur.cc.Close()
	}
	c.cur, c.old = nil, nil
}
