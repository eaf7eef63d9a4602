package peer

// Verifying peers: a share of the units a peer ran is computed here as
// well and compared (engine.Verifier, engine/verify.go); a peer caught
// with other values is quarantined.
//
// The Spiller answers engine.Verifier.Ran: the engine calls it for each
// unit a peer ran, right after RunUnit put the peer's output in out, so
// the Spiller remembers which peer filled which batch (ranBy, one entry
// per unit between RunUnit and Ran: a batch is one spill worker's while
// it does). The draw is math/rand/v2's, seeded by the runtime from the
// operating system's entropy and taken after the peer answered: the
// ticket a peer sees is the same whether its unit is verified or not,
// and nothing it sends changes the odds.
//
// A mismatch quarantines the peer in the pool, for the daemon's life:
// it is never picked again, by any job, nor probed back (a probe asks
// whether a peer answers, not whether it computes truly), and a peer
// that DNS drops and lists again stays quarantined by its address.
//
// It is quarantined by its certificate too: the SHA-256 fingerprint of
// the leaf certificate the lying output came with, from the TLS state of
// that unit's connection (not the peer's last answer, which may have
// come over another connection). Any peer presenting that certificate is
// quarantined as well: the same host under a second address (A and AAAA
// records, two entries in peers.addrs) or after its IP changed, and any
// other host sharing the certificate, whose key the liar holds. A peer
// is known by its certificate from its first answer on (the pool dials
// lazily and learns it from the answers): the units a peer answers with
// a quarantined certificate are verified (Ran), so its first answers are
// computed here and then it gets no more. With one certificate for every
// peer, one caught liar so removes them all (docs/peers.md, "Verifying
// peers").
//
// The pool's addresses do not reload (peers.addrs is read at start), so
// only a restart gives it units again: an operator who has found and fixed
// the peer restarts the requester. Units it had already answered and
// that were delivered unverified are not retracted (nothing can be, once
// a trainer read them); every unit of it that answers after the
// mismatch is verified (Ran says so), which computes it here and uses
// the local output whatever the peer sent.

import (
	"fmt"
	"math/rand/v2"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
)

// DefaultVerify is the share of spilled units verified when
// SpillerConfig.Verify is 0 (docs/peers.md says what it costs).
const DefaultVerify = 0.01

var _ engine.Verifier = (*Spiller)(nil)

// ran is who ran a unit: the peer, and the fingerprint of the
// certificate its output came with ("" over plaintext).
type ran struct {
	r    *remote
	cert string
}

// ranAt remembers that r ran the unit whose output is in out, and
// answered with the certificate of fingerprint cert.
func (s *Spiller) ranAt(out *column.Batch, r *remote, cert string) {
	s.mu.Lock()
	if s.ranBy == nil {
		s.ranBy = map[*column.Batch]ran{}
	}
	s.ranBy[out] = ran{r, cert}
	s.mu.Unlock()
}

// Ran implements engine.Verifier: a unit from a quarantined peer is
// always verified, any other with probability SpillerConfig.Verify.
func (s *Spiller) Ran(u decode.Unit, out *column.Batch) (bool, func(detail string)) {
	s.mu.Lock()
	by, ok := s.ranBy[out]
	delete(s.ranBy, out)
	s.mu.Unlock()
	if !ok {
		return false, nil // not a unit of this Spiller's: nothing to hold against anyone
	}
	if !s.pool.isQuarantined(by.r, by.cert) && !(s.verify > 0 && rand.Float64() < s.verify) {
		return false, nil
	}
	s.stats.Verified.Add(1)
	return true, func(detail string) { s.mismatch(by, u, detail) }
}

// mismatch quarantines by.r and its certificate, whose output of u
// differed from this host's.
func (s *Spiller) mismatch(by ran, u decode.Unit, detail string) {
	s.stats.Mismatches.Add(1)
	first, subject, also := s.pool.quarantine(by.r, by.cert, u, detail)
	s.log.Error("peer sent a unit whose values differ from this host's: the local output is used, and the peer, and every peer presenting its certificate, get no more units until this daemon restarts",
		"peer", by.r.addr, "subject", subject, "cert_sha256", by.cert, "file", u.File, "row_group", u.RowGroup, "row_start", u.RowStart, "rows", u.Rows,
		"difference", detail, "newly_quarantined", first, "also_quarantined", also)
}

// quarantine stops giving r, and every peer presenting the certificate
// of fingerprint cert ("": none), units for the rest of the pool's life
// and counts the mismatch; first is true when r was not quarantined
// yet, also lists the other peers this quarantined by the certificate.
func (p *Pool) quarantine(r *remote, cert string, u decode.Unit, detail string) (first bool, subject string, also []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r.st.Mismatches++
	why := fmt.Sprintf("unit %s row group %d rows %d+%d: %s", u.File, u.RowGroup, u.RowStart, u.Rows, detail)
	also = p.quarantineCertLocked(cert, r, why)
	if r.quarantined {
		return false, r.subject, also
	}
	if p.quarantined == nil {
		p.quarantined = map[string]string{}
	}
	p.quarantined[r.addr] = why
	r.quarantined = true
	r.st.Quarantined = why
	// Every job's unit cache stops serving believed units, as the
	// catching job's does: another job's may hold the liar's
	// (revoke.go, engine.Revoker).
	p.trust.revoked.Add(1)
	// The pool may list the address anew by now, as another remote:
	// dropped while this unit was verified (its last unit done, DNS no
	// longer listing it) and listed again before the mismatch was found.
	if now := p.peers[r.addr]; now != nil && now != r {
		now.quarantined, now.st.Quarantined = true, why
	}
	// Spill workers waiting for a credit pick again, among the others.
	close(p.freed)
	p.freed = make(chan struct{})
	return true, r.subject, also
}

// quarantineCertLocked quarantines the certificate of fingerprint cert
// ("": none), for why, and every peer but liar known to present it; it
// returns their addresses.
func (p *Pool) quarantineCertLocked(cert string, liar *remote, why string) []string {
	if cert == "" || p.quarantinedCerts[cert] != "" {
		return nil
	}
	if p.quarantinedCerts == nil {
		p.quarantinedCerts = map[string]string{}
	}
	p.quarantinedCerts[cert] = why
	var also []string
	for _, r := range p.peers {
		if r != liar && r.cert == cert && !r.quarantined {
			p.quarantineTwinLocked(r, why)
			also = append(also, r.addr)
		}
	}
	return also
}

// learnCertLocked notes that r answered with the certificate of
// fingerprint cert, and quarantines r if that certificate is.
func (p *Pool) learnCertLocked(r *remote, cert string) {
	if cert == "" {
		return
	}
	r.cert = cert
	if why := p.quarantinedCerts[cert]; why != "" && !r.quarantined {
		p.quarantineTwinLocked(r, why)
		p.log.Error("peer presents the certificate of a peer caught sending other values: it gets no more units until this daemon restarts",
			"peer", r.addr, "subject", r.subject, "cert_sha256", cert)
	}
}

// quarantineTwinLocked quarantines r, which presents the certificate of
// a peer quarantined for why.
func (p *Pool) quarantineTwinLocked(r *remote, why string) {
	why = "presents the certificate of a quarantined peer, which sent " + why
	if p.quarantined == nil {
		p.quarantined = map[string]string{}
	}
	p.quarantined[r.addr] = why
	r.quarantined, r.st.Quarantined = true, why
	close(p.freed)
	p.freed = make(chan struct{})
}

// isQuarantined reports whether r is quarantined: it, or its address
// under another remote that answered before it was dropped and listed
// again, or the certificate of fingerprint cert it answered a unit with.
func (p *Pool) isQuarantined(r *remote, cert string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return r.quarantined || p.quarantined[r.addr] != "" || cert != "" && p.quarantinedCerts[cert] != ""
}

// allQuarantined reports whether the pool lists peers and every one is
// quarantined: none will ever take a unit again (until a restart), so
// a unit is declined without waiting for a credit.
func (p *Pool) allQuarantined() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.peers {
		if !r.quarantined {
			return false
		}
	}
	return len(p.peers) > 0
}
