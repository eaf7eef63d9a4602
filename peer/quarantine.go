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
// that DNS drops and lists again stays quarantined by its address. The
// pool's addresses do not reload (peers.addrs is read at start), so only
// a restart gives it units again: an operator who has found and fixed
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

// ranAt remembers that r ran the unit whose output is in out.
func (s *Spiller) ranAt(out *column.Batch, r *remote) {
	s.mu.Lock()
	if s.ranBy == nil {
		s.ranBy = map[*column.Batch]*remote{}
	}
	s.ranBy[out] = r
	s.mu.Unlock()
}

// Ran implements engine.Verifier: a unit from a quarantined peer is
// always verified, any other with probability SpillerConfig.Verify.
func (s *Spiller) Ran(u decode.Unit, out *column.Batch) (bool, func(detail string)) {
	s.mu.Lock()
	r := s.ranBy[out]
	delete(s.ranBy, out)
	s.mu.Unlock()
	if r == nil {
		return false, nil // not a unit of this Spiller's: nothing to hold against anyone
	}
	if !s.pool.isQuarantined(r) && !(s.verify > 0 && rand.Float64() < s.verify) {
		return false, nil
	}
	s.stats.Verified.Add(1)
	return true, func(detail string) { s.mismatch(r, u, detail) }
}

// mismatch quarantines r, whose output of u differed from this host's.
func (s *Spiller) mismatch(r *remote, u decode.Unit, detail string) {
	s.stats.Mismatches.Add(1)
	first, subject := s.pool.quarantine(r, u, detail)
	s.log.Error("peer sent a unit whose values differ from this host's: the local output is used, and the peer gets no more units until this daemon restarts",
		"peer", r.addr, "subject", subject, "file", u.File, "row_group", u.RowGroup, "row_start", u.RowStart, "rows", u.Rows,
		"difference", detail, "newly_quarantined", first)
}

// quarantine stops giving r units for the rest of the pool's life and
// counts the mismatch; first is true when r was not quarantined yet.
func (p *Pool) quarantine(r *remote, u decode.Unit, detail string) (first bool, subject string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r.st.Mismatches++
	if r.quarantined {
		return false, r.subject
	}
	why := fmt.Sprintf("unit %s row group %d rows %d+%d: %s", u.File, u.RowGroup, u.RowStart, u.Rows, detail)
	if p.quarantined == nil {
		p.quarantined = map[string]string{}
	}
	p.quarantined[r.addr] = why
	r.quarantined = true
	r.st.Quarantined = why
	// The pool may list the address anew by now, as another remote:
	// dropped while this unit was verified (its last unit done, DNS no
	// longer listing it) and listed again before the mismatch was found.
	if now := p.peers[r.addr]; now != nil && now != r {
		now.quarantined, now.st.Quarantined = true, why
	}
	// Spill workers waiting for a credit pick again, among the others.
	close(p.freed)
	p.freed = make(chan struct{})
	return true, r.subject
}

// isQuarantined reports whether r is quarantined: it, or its address
// under another remote that answered before it was dropped and listed
// again.
func (p *Pool) isQuarantined(r *remote) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return r.quarantined || p.quarantined[r.addr] != ""
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
