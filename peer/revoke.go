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
//   - the pool records the chain every accepted unit came with, one per
//     issuing path (the leaf's issuer and the intermediates: a reload
//     changes roots only), and when (accepted), once its stream is whole
//     and before it is checked against the bundle in force
//     (conns.trusted);
//   - at each reload (CredsReloaded), after the connections are
//     re-verified, the count grows if the new bundle fails to verify a
//     recorded chain as of its acceptance (a leaf that expired since
//     withdraws nothing), whether or not a connection of that peer is still
//     open (a probe may have replaced it, or the peer left the pool), or
//     if the reload closed a connection for distrust; and at a peer's
//     first quarantine (quarantine.go), caught lying by any job's
//     verification: another job's cache may hold its units too;
//   - so a unit accepted under a bundle that a later bundle does not
//     verify is never served from a cache after that reload is applied.
//     A chain recorded after CredsReloaded read the records was recorded
//     after the bundle was swapped, so the check that follows it
//     (conns.trusted) refuses the unit. (Recorded after that check, the
//     first unit over a path could slip between the two, its connection
//     closed for distrust by another call's take, not by the reload:
//     TestReloadAfterTrustedWithdraws.) A chain recorded and then
//     refused is dropped at the next reload, which then withdraws once
//     more: work redone, never a unit served.
//
//   - the log holds at most maxChains paths: a chain over a path it has
//     no room for is not recorded, and the next reload grows the count
//     whatever its bundle (wasted work, never a unit served: a peer
//     adding certificates of its own to its chain at each handshake made
//     a path of each, kept for the daemon's life: TestTrustLogBounded).
//
// Steps (CredsReloaded): re-verify every peer's connections, counting
// those closed for distrust; then trustLog.reloaded verifies each
// recorded chain with the new bundle as of its acceptance, drops those
// it does not verify, and grows the count once if anything was withdrawn
// or a chain went unrecorded.
//
// Rejected: growing the count only when a reload closed a connection
// (a peer whose connection a probe had replaced, or that DNS dropped, kept
// its cached units); the engine asking which peer computed each cached
// unit (the cache would hold peer identities, and every believed unit
// is recomputed at the price of one epoch's spill, once); verifying the
// chain again at each cache lookup (an x509 verification per unit); a
// record per leaf, verified as of the reload (a peer renewed daily kept
// a chain a day, and a leaf that had expired since read as a withdrawal:
// TestTrustLogWithdrawsOnlyRemovedCAs).

import (
	"crypto/sha256"
	"crypto/x509"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lastmile/lastmile/engine"
	"google.golang.org/grpc/credentials"
	gpeer "google.golang.org/grpc/peer"
)

// trustLog is the chains of the peers whose units were accepted, and
// the count of withdrawals of trust (revoke.go).
type trustLog struct {
	revoked atomic.Uint64
	mu      sync.Mutex
	chains  map[[sha256.Size]byte]acceptedChain // by issuingPath
	// full: a chain was accepted over a path not kept, the log holding
	// maxChains: the next reload withdraws trust, unable to tell.
	full bool
}

// acceptedChain is the last chain a unit was accepted with over an
// issuing path, and when.
type acceptedChain struct {
	chain []*x509.Certificate
	at    time.Time
}

// issuingPath is the hash of what a bundle's verdict on chain depends on
// besides its roots: the leaf's issuer and authority key, and the
// intermediates. A reload replaces roots only, so one chain per path
// says it all, and a peer's renewals under the same CA keep one entry.
func issuingPath(chain []*x509.Certificate) [sha256.Size]byte {
	h := sha256.New()
	h.Write(chain[0].RawIssuer)
	h.Write(chain[0].AuthorityKeyId)
	for _, c := range chain[1:] {
		h.Write(c.Raw)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// accepted records the chain of the peer p a unit was accepted from
// (nothing over plaintext).
func (l *trustLog) accepted(p *gpeer.Peer) {
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return
	}
	chain := info.State.PeerCertificates
	path := issuingPath(chain)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.chains == nil {
		l.chains = map[[sha256.Size]byte]acceptedChain{}
	}
	if _, ok := l.chains[path]; !ok && len(l.chains) >= maxChains {
		l.full = true
		return
	}
	l.chains[path] = acceptedChain{chain, time.Now()}
}

// reloaded applies a reload of the CA bundle, now, after which closed
// connections were closed for distrust: it drops the recorded chains now
// does not verify as of their acceptance (a leaf that expired since is
// not a withdrawal: its units were computed while it was valid), and
// grows the count if any, or if closed > 0, or if a chain went
// unrecorded since the last reload (full). It returns how many chains it
// dropped, and whether it grew the count.
func (l *trustLog) reloaded(now *x509.CertPool, closed int) (dropped int, withdrew bool) {
	l.mu.Lock()
	full := l.full
	l.full = false
	for path, c := range l.chains {
		if verifyChainAt(c.chain, now, c.at) != nil {
			delete(l.chains, path)
			dropped++
		}
	}
	l.mu.Unlock()
	if withdrew = dropped > 0 || closed > 0 || full; withdrew {
		l.revoked.Add(1)
	}
	return dropped, withdrew
}

// Revoked implements engine.Revoker: the count of the pool's withdrawals
// of trust from peers whose units may have been accepted (revoke.go).
func (s *Spiller) Revoked() uint64 { return s.pool.trust.revoked.Load() }

// maxChains bounds the chains a trustLog keeps: far more issuing paths
// than a cluster has (its CAs, times their intermediates' renewals), and
// far fewer than a peer that adds certificates of its own to its chain
// at each handshake, each a path (revoke.go).
const maxChains = 64

var _ engine.Revoker = (*Spiller)(nil)
