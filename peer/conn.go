package peer

import (
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
)

// A requester's connections, its CA bundle, and renewals.
//
// A requester verifies peers with a CA bundle that SIGHUP may replace
// (Creds.Reload): a CA added for a rotation, or one removed because it
// must no longer be trusted. Each connection to a peer (peerConn) holds
// the bundle it verifies the peer with and the certificate chain the
// peer presented at its last handshake (verifiedTLS, conn_tls.go, takes
// both at each handshake: gRPC makes a connection's handshakes again
// whenever its transport reconnects).
//
// Invariants:
//
//   - a call starts only on a connection whose bundle is the one in
//     force (PoolConfig.Roots), and whose last handshake's chain that
//     bundle verifies;
//   - once a reload is applied, no connection stays open, idle or busy,
//     whose peer's chain the new bundle does not verify: a removed
//     (compromised) CA is trusted by no connection;
//   - a connection whose peer still verifies stays, with the calls on it;
//   - a unit is accepted only if, once its stream is whole, the bundle
//     in force still verifies its connection's peer (trusted): a unit
//     received between Creds.Reload and the close, or received whole
//     before the close and read after it, is refused.
//
// Steps of a reload (reverify, applied by Pool.CredsReloaded at SIGHUP,
// and by use at a peer's next call should a reload not have been
// announced):
//
//  1. for each of a peer's connections whose bundle is not the one in
//     force: if it has not handshaken yet, it takes the new bundle (its
//     first handshake verifies with it); if its chain verifies under the
//     new bundle, it takes the new bundle and stays; otherwise it is
//     closed now, with the calls on it;
//  2. a closed current connection is replaced by a new one (gRPC connects
//     lazily: its handshake, with the new bundle, is the next call's), and
//     so is one that never completed a handshake (gRPC would fail its
//     calls with the last failure until its own next attempt);
//  3. a handshake that began under the old bundle and ends after step 1
//     is checked again under the new one when it ends (verifiedTLS).
//
// The units on a closed connection fail, and their spill workers compute
// them here, as after any failed spill: nothing already accepted is lost
// (a unit is accepted only once its whole stream arrived and checked),
// and the batches are those of a local run.
//
// Renewals. A connection whose handshake failed is kept by gRPC, which
// retries it on its own schedule (a backoff from 1s growing to 120s)
// and meanwhile fails each call with the failure it kept. A probe of a
// failed peer (health.go) therefore does not reuse such a connection: it
// makes a new one (fresh), so that each probe is a handshake, and a peer
// whose certificate was renewed is re-admitted at its next probe rather
// than at gRPC's next attempt (up to two minutes later: about 60s were
// measured). A peer refused for its certificate (pc.refused) is probed
// on refusedBackoff's schedule (a second apart at first, then 4-5s);
// any other failure keeps the growing exclusion. After a probe failed,
// its connection is replaced by one not yet connected (rest), so that
// gRPC's own retries add no handshakes between probes.
//
// Rejected: closing every connection at a reload (the peers that still
// verify lose the units on them, for nothing); letting connections made
// with the old bundle carry the calls already on them until they end (a
// removed CA stayed trusted for as long as a connection was used, and an
// idle one stayed open); verifying by hand with InsecureSkipVerify (the
// check of every peer's identity in our code; here crypto/tls still
// verifies each handshake, with the bundle chosen per handshake);
// gRPC's ResetConnectBackoff before a probe (experimental, and a call
// racing the reset still failed with the kept error).

// peerConn is one gRPC connection to a peer.
type peerConn struct {
	cc     *grpc.ClientConn
	client flight.Client
	users  int // calls on it now: units and probes (conns.mu)
	// retired: replaced, or its peer left the pool; closed once users
	// is 0 (conns.mu).
	retired bool
	// distrusted: closed by a reload whose bundle does not verify its
	// peer (conns.mu); what its calls received is not accepted.
	distrusted bool
	// spare: made by rest, in place of one a probe failed on, and not
	// connected before the next probe (conns.mu).
	spare bool

	mu sync.Mutex
	// roots is the bundle its handshakes verify the peer with (nil:
	// PoolConfig.TLS's own, or plaintext).
	roots *x509.CertPool
	// chain is the certificates the peer presented at the last
	// handshake that succeeded, leaf first.
	chain []*x509.Certificate
	// refused: why its last handshake refused the peer's certificate
	// (the x509 error; nil: it did not).
	refused error
}

// bundle is the CA bundle pc's next handshake verifies the peer with.
func (pc *peerConn) bundle() *x509.CertPool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.roots
}

// trusts reports whether pc may carry calls under the bundle now: it
// takes now if its last handshake's chain verifies under it (or it has
// none yet).
func (pc *peerConn) trusts(now *x509.CertPool) error {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.roots == now {
		return nil
	}
	if pc.chain != nil {
		if err := verifyChain(pc.chain, now); err != nil {
			return err
		}
	}
	pc.roots = now
	return nil
}

// handshaken reports whether a handshake of pc has succeeded.
func (pc *peerConn) handshaken() bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.chain != nil
}

// conns is a peer's connection, and those retired with calls still on
// them.
type conns struct {
	mu   sync.Mutex
	cur  *peerConn   // nil once closed
	old  []*peerConn // retired, with calls on them still
	dial func(roots *x509.CertPool) (*peerConn, error)
	// roots returns the bundle in force; nil: PoolConfig.TLS's, never
	// replaced.
	roots func() *x509.CertPool
	// trust records the chains units were accepted from (the pool's;
	// revoke.go).
	trust *trustLog
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
// reload of the CA bundle not yet applied to the peer's connections is
// applied first (reverify).
func (c *conns) use() (flight.Client, func(), error) {
	pc, release, err := c.take()
	if err != nil {
		return nil, nil, err
	}
	return pc.client, release, nil
}

// take is use, returning the connection, for a caller that asks it is
// still trusted (trusted) before it accepts what the call received.
func (c *conns) take() (*peerConn, func(), error) {
	c.mu.Lock()
	var closing []*peerConn
	if c.cur != nil && c.roots != nil {
		if now := c.roots(); now != c.cur.bundle() {
			closing = c.reverifyLocked(now)
		}
	}
	pc, err := c.cur, error(nil)
	if pc == nil {
		err = errConnClosed
	} else {
		pc.users++
	}
	c.mu.Unlock()
	closeAll(closing)
	if err != nil {
		return nil, nil, err
	}
	return pc, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if pc.users--; pc.retired && pc.users == 0 {
			pc.cc.Close()
			c.old = slices.DeleteFunc(c.old, func(o *peerConn) bool { return o == pc })
		}
	}, nil
}

// trusted reports whether what a call on pc (take) received may be
// accepted: the bundle in force, applied first if a reload has not been
// yet (reverify), still verifies the peer. A call checked when it
// started would otherwise accept a unit received between a reload and
// the close of its connection, or received whole before the close (gRPC
// hands a closed stream's buffered messages to its reader).
func (c *conns) trusted(pc *peerConn) error {
	if c.roots == nil {
		return nil
	}
	c.mu.Lock()
	var closing []*peerConn
	if now := c.roots(); now != pc.bundle() {
		closing = c.reverifyLocked(now)
	}
	distrusted := pc.distrusted
	c.mu.Unlock()
	closeAll(closing)
	if distrusted {
		return errDistrusted
	}
	return nil
}

var errDistrusted = errors.New("peer certificate: the CA bundle reloaded meanwhile does not verify it; the connection was closed and what came over it is not accepted")

// reverify applies the CA bundle in force to the peer's connections: it
// closes those whose peer it no longer verifies, with the calls on them.
// It returns how many it closed.
func (c *conns) reverify() int {
	if c.roots == nil {
		return 0
	}
	c.mu.Lock()
	closing := c.reverifyLocked(c.roots())
	c.mu.Unlock()
	closeAll(closing)
	return len(closing)
}

// reverifyLocked is reverify under c.mu with the bundle now, returning
// the connections to close once c.mu is released (a close waits for
// gRPC's goroutines; the peer's other calls need not). A current
// connection closed is replaced by one that verifies with now.
func (c *conns) reverifyLocked(now *x509.CertPool) []*peerConn {
	var closing []*peerConn
	c.old = slices.DeleteFunc(c.old, func(pc *peerConn) bool {
		if pc.trusts(now) != nil {
			pc.distrusted = true
			closing = append(closing, pc)
			return true
		}
		return false
	})
	if c.cur == nil {
		return closing
	}
	switch err := c.cur.trusts(now); {
	case err == nil && c.cur.handshaken():
		return closing
	case err == nil:
		// No handshake of it succeeded: gRPC would fail its calls with
		// the last one's failure until its own next attempt, although
		// the new bundle may verify the peer. Its calls, if any, end
		// there.
		c.retireLocked(c.cur)
	default:
		closing = append(closing, c.cur)
		c.cur.retired, c.cur.distrusted = true, true
	}
	next, err := c.dial(now)
	if err != nil {
		c.cur = nil // never so far: grpc.NewClient connects lazily, and took this address before
		return closing
	}
	c.cur = next
	return closing
}

// closeAll closes pcs now, canceling the calls on them.
func closeAll(pcs []*peerConn) {
	for _, pc := range pcs {
		pc.cc.Close()
	}
}

// fresh replaces the peer's connection by a new one unless it is ready:
// one whose handshake failed keeps failing calls with that failure
// until gRPC's own next attempt, which its backoff may put minutes
// away. The old one is closed once the calls on it are done.
func (c *conns) fresh() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		return errConnClosed
	}
	if st := c.cur.cc.GetState(); st == connectivity.Ready || c.cur.spare && st == connectivity.Idle {
		return nil
	}
	var roots *x509.CertPool
	if c.roots != nil {
		roots = c.roots()
	}
	next, err := c.dial(roots)
	if err != nil {
		return fmt.Errorf("a new connection: %w", err)
	}
	c.retireLocked(c.cur)
	c.cur = next
	return nil
}

// rest replaces the peer's connection, which a probe failed on, by one
// that has not connected (spare; grpc.NewClient connects at the first
// call): gRPC would retry the failed one on its own schedule (from 1s),
// each retry a handshake on top of the next probe's. Whether the failed
// one's peer certificate was refused is kept (certRefused). A ready
// connection (the peer answered, of another version or build, or too
// late) is kept.
func (c *conns) rest() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil || c.cur.cc.GetState() == connectivity.Ready {
		return
	}
	var roots *x509.CertPool
	if c.roots != nil {
		roots = c.roots()
	}
	next, err := c.dial(roots)
	if err != nil {
		return // the failed one stays: the next probe replaces it (fresh)
	}
	next.refused, next.spare = c.cur.refusal(), true
	c.retireLocked(c.cur)
	c.cur = next
}

// certRefused reports whether the last handshake of the peer's
// connection refused the peer's certificate.
func (c *conns) certRefused() bool { return c.certRefusal() != nil }

// certRefusal is why the last handshake of the peer's connection refused
// the peer's certificate (an x509 error), or nil.
func (c *conns) certRefusal() error {
	c.mu.Lock()
	pc := c.cur
	c.mu.Unlock()
	if pc == nil {
		return nil
	}
	return pc.refusal()
}

// refusal is why pc's last handshake refused the peer's certificate, or
// nil.
func (pc *peerConn) refusal() error {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.refused
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
