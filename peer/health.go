package peer

// Health: a peer that failed is excluded for a growing backoff and
// probed when its exclusion ends; one that keeps losing hedged units is
// checked, and excluded only if it does not answer.

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
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
// One that does not answer is excluded for twice as long, one of another
// version or build for versionBackoff. A hung or partitioned peer so
// costs a probe, not a unit's deadline, each time its exclusion ends.
func (p *Pool) probe(r *remote) {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	// Waiting for the connection gives gRPC's reconnection to a peer that
	// came back the probe's time, rather than failing at once.
	in, err := r.info(ctx, grpc.WaitForReady(true))
	cancel()
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
		r.backoff = min(max(2*r.backoff, time.Second), maxBackoff)
		if another {
			r.backoff = versionBackoff
		}
		r.excluded = time.Now().Add(r.backoff)
		r.st.LastError = err.Error()
		p.log.Debug("peer still not answering", "peer", r.addr, "for", r.backoff, "err", err)
		p.probeWhenDue(r)
		return
	}
	r.suspect = false
	close(p.freed) // waiting spill workers may pick it now
	p.freed = make(chan struct{})
	p.log.Info("peer answers again; re-admitted", "peer", r.addr)
}

// probeTimeout bounds a probe of a failed peer, and checkTimeout a check
// of a peer whose units were all done here first (check); the exclusions
// after failures grow from 1s to maxBackoff (versionBackoff for a peer of
// another protocol version or build, which an operator must upgrade).
const (
	probeTimeout   = 2 * time.Second
	checkTimeout   = time.Second
	maxBackoff     = 30 * time.Second
	versionBackoff = 10 * time.Minute
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
	r.st.LastError = err.Error()
	r.backoff = min(max(2*r.backoff, time.Second), maxBackoff)
	if status.Code(err) == codes.FailedPrecondition {
		r.backoff = versionBackoff // another protocol version or build: an operator must act
	}
	r.excluded = time.Now().Add(r.backoff)
	r.suspect, r.slow = true, 0
	p.log.Warn("peer failed; excluded", "peer", r.addr, "for", r.backoff, "err", err)
	p.probeWhenDue(r)
}
