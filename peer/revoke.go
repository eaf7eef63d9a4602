package peer

// Withdrawn trust, for the jobs' unit caches (engine/revoke.go).
//
// A job's unit cache keeps the units peers computed, most of them
// unverified (believed), for its later epochs. A CA reload (SIGHUP) that
// removes a CA may mean its key leaked: whoever holds it could have
// computed those units, and they must not be served again, as a caught
// liar's are not. The pool keeps a count (trustLog.revoked) that grows
// whenever a reload withdraws trust from a peer whose units may have
// been accepted; every job's Spiller gives it to the engine
// (engine.Revoker), whose cache then serves no believed unit again: they
// are computed anew, here or on a peer still trusted.
//
// Invariants:
//   - the pool records the chain every accepted unit came with, by its
//     leaf's fingerprint (accepted), once the unit is trusted
//     (conns.trusted) and before its call's connection is released;
//   - at each reload (CredsReloaded), after the connections are
//     re-verified, the count grows if the new bundle fails to verify a
//     recorded chain (whether or not a connection of that peer is still
//     open: a probe may have replaced it, or the peer left the pool), or
//     if the reload closed a connection for distrust;
//   - so a unit accepted under a bundle that a later bundle does not
//     verify is never served from a cache after that reload is applied.
//     A unit trusted just before the bundle was swapped, and recorded
//     only after CredsReloaded read the records, was on a connection in
//     use then (its call not released): CredsReloaded closed that
//     connection for distrust, which grows the count too.
//
// Steps (CredsReloaded): re-verify every peer's connections, counting
// those closed for distrust; then trustLog.reloaded verifies each
// recorded chain with the new bundle, drops those it does not verify, and
// grows the count once if anything was withdrawn.
//
// Rejected: growing the count only when a reload closed a connection
// (a peer whose connection a probe had replaced, or that DNS dropped, kept
// its cached units); the engine asking which peer computed each cached
// unit (the cache would hold peer identities, and every believed unit
// is recomputed at the price of one epoch's spill, once); verifying the
// chain again at each cache lookup (an x509 verification per unit).

import (
	"crypto/sha256"
	"crypto/x509"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/credentials"
	gpeer "google.golang.org/grpc/peer"
)

// trustLog is the chains of the peers whose units were accepted, and
// the count of withdrawals of trust (revoke.go).
type trustLog struct {
	revoked atomic.Uint64
	mu      sync.Mutex
	chains  map[[sha256.Size]byte][]*x509.Certificate // by the leaf's SHA-256
}

// accepted records the chain of the peer p a unit was accepted from
// (nothing over plaintext).
func (l *trustLog) accepted(p *gpeer.Peer) {
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return
	}
	chain := info.State.PeerCertificates
	sum := sha256.Sum256(chain[0].Raw)
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.chains[sum]; ok {
		return
	}
	if l.chains == nil {
		l.chains = map[[sha256.Size]byte][]*x509.Certificate{}
	}
	l.chains[sum] = chain
}

// reloaded applies a reload of the CA bundle, now, after which closed
// connections were closed for distrust: it drops the recorded chains now
// does not verify, and grows the count if any, or if closed > 0. It
// returns how many chains it dropped.
func (l *trustLog) reloaded(now *x509.CertPool, closed int) int {
	l.mu.Lock()
	dropped := 0
	for sum, chain := range l.chains {
		if verifyChain(chain, now) != nil {
			delete(l.chains, sum)
			dropped++
		}
	}
	l.mu.Unlock()
	if dropped > 0 || closed > 0 {
		l.revoked.Add(1)
	}
	return dropped
}

// Revoked implements engine.Revoker: the count of the pool's withdrawals
// of trust from peers whose units may have been accepted (revoke.go).
func (s *Spiller) Revoked() uint64 { return s.pool.trust.revoked.Load() }
