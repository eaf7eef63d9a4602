package peer

// Health: a peer that failed is excluded for a growing backoff and
// probed when its exclusion ends; one that keeps losing hedged units is
// checked, and excluded only if it does not answer.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// probeLocked starts a probe of r if it failed, its exclusion is over
// and none is out. A timer set at the exclusion calls it when the
// exclusion ends, so that a peer is re-admitted as soon as it answers,
// whether or not a job is spilling; pick calls it too.
func (p *Pool) probeLocked(r *remote, now time.Time) {
	if r.suspect && !r.probing && !r.gone && !now.Before(r.excluded) {
		select {
		case <-p.stop:
			return // closed
		default:
		}
		r.probing = true
		go p.probe(r)
	}
}

// probeWhenDue calls probeLocked once r's exclusion is over.
func (p *Pool) probeWhenDue(r *remote) {
	time.AfterFunc(time.Until(r.excluded), func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.probeLocked(r, time.Now())
	})
}

// probe asks a peer that failed, once its exclusion is over, whether it
// answers again (InfoAction, within probeTimeout), speaks this version
// and is of this compute identity (identity.go): then it is re-admitted.
// One that does not answer is excluded for twice as long
// (refusedBackoff if it was refused for its certificate), one of another
// version or build for versionBackoff. A hung or partitioned peer so costs a
// probe, not a unit's deadline, each time its exclusion ends.
//
// The probe goes over a new connection unless the peer's is ready
// (conns.fresh): a connection whose handshake failed would fail the
// probe with that failure, kept by gRPC until its own next attempt, and
// a peer whose certificate was renewed meanwhile would wait for it
// (conn.go). So the probe is a handshake, and fails as soon as it does.
func (p *Pool) probe(r *remote) {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	var in Info
	err := r.conns.fresh()
	if err == nil {
		in, err = r.info(ctx)
	}
	cancel()
	if err != nil {
		r.conns.rest() // no retries of gRPC's own until the next probe
	}
	another := false // of another version or build: an operator must act
	if err == nil {
		err = in.Mismatch(r.addr)
		another = err != nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r.probing = false
	if in.Compute != "" {
		r.st.Compute = clipCompute(in.Compute)
	}
	if err != nil {
		r.backoff = p.nextBackoff(r, err)
		if another {
			r.backoff = versionBackoff
		}
		r.excluded = time.Now().Add(r.backoff)
		r.st.LastError = lastError(err, refusalHint(r.conns.certRefusal(), err))
		p.log.Debug("peer still not answering", "peer", r.addr, "for", r.backoff, "err", err)
		p.probeWhenDue(r)
		return
	}
	r.suspect, r.refusals = false, 0
	close(p.freed) // waiting spill workers may pick it now
	p.freed = make(chan struct{})
	p.log.Info("peer answers again; re-admitted", "peer", r.addr)
}

// nextBackoff is r's exclusion after a failure, err: twice the last,
// from 1s to maxBackoff; refusedBackoff while its handshakes refuse its
// certificate (a renewal fixes that at a moment nobody tells this host,
// and a probe then costs a handshake, not a unit: no unit is sent to a
// peer before a probe's handshake succeeded); versionBackoff for
// another protocol version or build.
func (p *Pool) nextBackoff(r *remote, err error) time.Duration {
	refused := r.refusals
	r.refusals = 0
	switch {
	case status.Code(err) == codes.FailedPrecondition:
		return versionBackoff // another protocol version or build: an operator must act
	case r.conns.certRefused():
		r.refusals = refused + 1
		return refusedBackoff(r.refusals)
	}
	return min(max(2*r.backoff, time.Second), maxBackoff)
}

// refusedBackoff is the exclusion after the n-th refusal in a row of a
// peer's certificate: certFast probes certBackoff apart, so that a
// renewal made as the refusals begin (a rotation under way) is seen
// within a second or so; then twice as far apart each, up to
// maxCertBackoff, and up to a fifth longer at random. A certificate
// nobody renews so costs each requester a handshake every 4-5s, not
// every second forever (with many requesters, as many handshakes and
// refusals a second at the peer), and the probes of requesters that
// failed together (the peer restarted) drift apart; a renewal is seen
// within about 5s, and one of the requester's own at once (its SIGHUP
// probes: CredsReloaded). Rejected: a second apart forever (the load
// above, for a peer that may stay broken for days); the growing
// exclusion of other failures (30s before a renewal is seen).
func refusedBackoff(n int) time.Duration {
	d := certBackoff
	if n > certFast {
		d = min(certBackoff<<min(n-certFast, 8), maxCertBackoff)
	}
	return d + rand.N(d/5)
}

// probeTimeout bounds a probe of a failed peer, and checkTimeout a check
// of a peer whose units were all done here first (check); the exclusions
// after failures grow from 1s to maxBackoff (versionBackoff for a peer of
// another protocol version or build, which an operator must upgrade;
// for one whose certificate the handshake refuses, which an operator
// renews: certFast probes certBackoff apart, then twice as far apart
// each up to maxCertBackoff, refusedBackoff).
const (
	probeTimeout   = 2 * time.Second
	checkTimeout   = time.Second
	maxBackoff     = 30 * time.Second
	versionBackoff = 10 * time.Minute
	certBackoff    = time.Second
	certFast       = 5
	maxCertBackoff = 4 * time.Second
)

// slowLimit is how many units in a row a peer may lose to hedges before
// it is checked.
const slowLimit = 3

// check asks r, whose last lost units were all done here first, whether
// it answers (InfoAction, within checkTimeout: a peer answers it at once
// however busy its workers are), and excludes it if it does not.
func (p *Pool) check(r *remote, lost int) {
	p.mu.Lock()
	units := r.st.Units
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	_, err := r.info(ctx)
	cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	r.probing = false
	if r.suspect {
		// Excluded meanwhile, by a failure: its timer found this check
		// out and started no probe, so start one when it is due.
		p.probeWhenDue(r)
		return
	}
	// A unit that came back meanwhile is an answer too.
	if err != nil && r.st.Units == units {
		p.excludeLocked(r, fmt.Errorf("peer %s: the last %d units sent to it were done here first, and it does not answer: %w", r.addr, lost, err))
	}
}

// excludeLocked excludes r after a failure, err, for its next backoff; it
// gets units again once it answers a probe.
func (p *Pool) excludeLocked(r *remote, err error) {
	hint := refusalHint(r.conns.certRefusal(), err)
	r.st.LastError = lastError(err, hint)
	r.backoff = p.nextBackoff(r, err)
	r.excluded = time.Now().Add(r.backoff)
	r.suspect, r.slow = true, 0
	if hint != "" {
		p.log.Warn("peer failed; excluded", "peer", r.addr, "for", r.backoff, "err", err, "hint", hint)
	} else {
		p.log.Warn("peer failed; excluded", "peer", r.addr, "for", r.backoff, "err", err)
	}
	p.probeWhenDue(r)
}

// CredsReloaded applies a reload of the requester's certificate files
// (SIGHUP: Creds.Reload) at once: every peer's connections are verified
// with the CA bundle now in force, and those it no longer verifies are
// closed, idle or not (conn.go); if a peer whose units were taken is no
// longer verified, every job's unit cache stops serving the units peers
// computed unverified (revoke.go); and every failed peer is probed now,
// rather than when its exclusion ends, since the reload may be what it
// needed (a CA added, this host's certificate renewed). A probe that
// fails excludes it for its next backoff, as any.
func (p *Pool) CredsReloaded() {
	p.mu.Lock()
	peers := make([]*remote, 0, len(p.peers))
	for _, r := range p.peers {
		peers = append(peers, r)
	}
	p.mu.Unlock()
	closed := 0
	for _, r := range peers {
		if n := r.conns.reverify(); n > 0 {
			closed += n
			p.log.Warn("closed connections to a peer the reloaded CA bundle does not verify; units on them are computed here",
				"peer", r.addr, "connections", n)
		}
	}
	if p.cfg.Roots != nil {
		if dropped, withdrew := p.trust.reloaded(p.cfg.Roots(), closed); withdrew {
			p.log.Warn("the reloaded CA bundle no longer verifies peers whose units were accepted: the jobs' unit caches serve none of the units peers computed unverified, which are computed again",
				"certificates", dropped, "connections", closed, "unrecorded", dropped == 0 && closed == 0)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for _, r := range peers {
		if r.suspect && !r.quarantined {
			r.excluded = now
			p.probeLocked(r, now)
		}
	}
}
