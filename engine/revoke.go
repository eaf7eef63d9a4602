package engine

// Withdrawn trust: units a peer computed, kept in the unit cache, after
// the requester stopped trusting the peer.
//
// A unit a peer computed and nobody verified is kept in the unit cache
// like any other, and noted believed (cache.go); a verification that
// catches a peer lying makes the cache serve none of those again
// (distrust, verify.go). A peer may also lose the requester's trust
// without being caught: the operator removes its CA from the bundle
// (SIGHUP), perhaps because the CA's key leaked, and whoever holds it
// could have computed those units. The Spill knows of that, the engine
// does not: a Spill that implements Revoker gives a count that grows
// each time it withdraws trust from a peer that may have delivered
// units (package peer: Pool.CredsReloaded).
//
// Invariants:
//   - once Revoked has grown past its count at the run's start, no
//     believed unit is served from the cache, nor kept, nor its row count
//     trusted: the cache distrusts, for the rest of the run, as after a
//     mismatch. The units are computed again, here or on a peer still
//     trusted, so the batches stay those of a run without peers;
//   - a unit delivered before the count grew is not retracted (nothing
//     can be, once the batcher has it), as a caught liar's are not;
//   - the cache asks at each lookup (view, rows, keep): a withdrawal
//     made mid-epoch holds from the next unit on, not the next epoch.
//
// Rejected: the Spill telling the engine (a callback): it serves many
// jobs' runs, each with its own cache, and would have to know them all;
// distrusting only the units of the peer concerned (the cache would have
// to know peers, a Spill's business, and a distrusted CA's peers are few
// and rare: recomputing every believed unit costs an epoch's spill once);
// polling once per epoch (a withdrawal then held only from the next).

// Revoker is implemented by a Spill whose trust in its peers may be
// withdrawn after it accepted units from them (revoke.go).
type Revoker interface {
	// Revoked returns a count that grows each time the Spill withdraws
	// its trust in a peer that may have computed units it accepted.
	// It is called at each lookup of the unit cache: it must be cheap.
	Revoked() uint64
}

// watch has the cache distrust once spill, if a Revoker, withdraws trust
// after now (the run's start).
func (c *unitCache) watch(spill Spill) {
	r, ok := spill.(Revoker)
	if c == nil || !ok {
		return
	}
	c.revoked, c.since = r.Revoked, r.Revoked()
}

// pollLocked makes the cache distrust if the Spill withdrew trust since
// the run began (c.mu held).
func (c *unitCache) pollLocked() {
	if !c.distrusts && c.revoked != nil && c.revoked() != c.since {
		c.distrusts = true
	}
}
