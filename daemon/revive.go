package daemon

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
)

// Reviving a done job
//
// A job is done once production has published every batch; its rings
// stay until their trainers have read them (or the grace period ends). A
// trainer that dies in that last ring-full restarts from its checkpoint,
// which is older than what its ring still holds, and torchrun restarts the
// other ranks of the world with it. Submitting the same spec joins the
// done job (the trainers of one world must share it), so refusing the
// attach would hold the restarted world until the grace period forgets
// the job. Instead the attach brings the job back to production:
//
//  1. Under attachMu (attaches, restarts and cancels are serialized), the
//     state is checked and set to pending in one step under mu: the
//     monitor, which removes a done job's rings, removes them only from a
//     job that is still terminal (removeRings), so it sees either the done
//     job or the revived one, never rings taken from under a new run.
//  2. Every ring is made afresh by the new run: the asking rank's from its
//     cursor, every other rank's from where its consumer stands. A done
//     run's rings have ended, and an ended ring is never continued (a
//     consumer that read its end has stopped; the ring format has no way
//     back to running). A consumer still reading an old ring's tail
//     finishes it there, from its own mapping; if it comes back, its
//     cursor says where it is, as after any restart.
//  3. The job keeps its id, counters, pins, unit counts and memory
//     reservation (a done job whose rings exist is still counted,
//     reservedLocked); its scheduler client is reopened and a new
//     supervisor runs, with a finished channel of its own.
//
// Rejected: continuing the ended rings in place (above); a second job
// under the same name (the trainers hold this job's id, and a world on
// several hosts has exchanged this job's counts); refusing and asking the
// user to cancel the job first (a restarted world cannot do that).

// revive brings the done job back to production so that rank continues
// at cursor; it returns once the new run's rings exist. Called with
// attachMu held.
func (j *Job) revive(ctx context.Context, rank int, cursor engine.Cursor, wait time.Duration) error {
	infos, ok := j.ringInfos()
	// A done job restored after a restart of lastmiled has no observers
	// (restore opens none for a terminal job): read its rings directly.
	for len(infos) < j.local {
		infos, ok = append(infos, shm.RingInfo{}), append(ok, false)
	}
	for k := range infos {
		if !ok[k] {
			if info, err := shm.Inspect(j.spec.Ring.Dir, j.ringName(k)); err == nil {
				infos[k], ok[k] = info, true
			}
		}
	}
	j.mu.Lock()
	if j.state != Done || j.removed {
		st, removed := j.state, j.removed
		j.mu.Unlock()
		if removed {
			return errorf(http.StatusConflict, "job %q is done and its rings were removed: submit it again", j.name)
		}
		return errorf(http.StatusConflict, "job %q is %s: its rings cannot be regenerated", j.name, st)
	}
	resume := make([]engine.Cursor, j.local)
	for k := range resume {
		switch {
		case k == rank:
			resume[k] = cursor
		case k < len(infos) && ok[k] && k < len(j.ranks) && infos[k].Generation == j.ranks[k].Generation:
			if c, known := standing(infos[k], j.ranks[k].Start); known {
				resume[k] = c
				continue
			}
			resume[k] = nextOrStart(&j.ranks[k]) // all it held: a consumer skips what it read
		case k < len(j.ranks):
			resume[k] = nextOrStart(&j.ranks[k]) // where its consumer was last seen
		}
	}
	old := j.latest
	j.state, j.errMsg, j.ended = Pending, "", time.Time{}
	j.next, j.stopWhy, j.cancelMsg = resume, "", ""
	j.restarts++
	j.lastActive = time.Now()
	j.finished = make(chan struct{})
	j.client.Reopen() // with the state, under mu: finish closes it under mu too
	j.mu.Unlock()
	for k := range resume {
		shm.Unclaim(j.spec.Ring.Dir, j.ringName(k)) // none are held; a claim would adopt an ended ring
	}
	j.log.Info("done job brought back to production for a trainer's cursor", "rank", j.rankBase+rank, "cursor", cursor, "resume", fmt.Sprint(resume))
	j.persist()
	j.d.notifyStatus()
	go j.supervise()
	return j.waitNewRun(ctx, old, wait, "restarted")
}

// waitNewRun waits until a run other than old has its rings. A new run
// that has them and already ended (done: the ring held all the rank had
// left) counts. what names the production in the errors ("restarted").
func (j *Job) waitNewRun(ctx context.Context, old *run, wait time.Duration, what string) error {
	deadline := time.Now().Add(wait)
	var seen *run // the newest run seen
	for {
		j.mu.Lock()
		r, latest, st, msg := j.run, j.latest, j.state, j.errMsg
		j.mu.Unlock()
		// j.latest, not j.run, which finish clears: a short run may start,
		// be ready and end between two looks.
		if latest != nil && latest != old {
			seen = latest
		}
		if seen != nil {
			select {
			case <-seen.ready:
				return nil
			default:
			}
		}
		if st.Terminal() {
			return errorf(http.StatusConflict, "job %q %s while restarting: %s", j.name, st, msg)
		}
		if seen != nil && seen == r {
			select {
			case <-r.ready:
				return nil
			case <-r.done:
				continue
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Until(deadline)):
				return &apiError{status: http.StatusServiceUnavailable, retryAfter: 5, msg: fmt.Sprintf("job %q: %s production has no rings yet: attach again", j.name, what)}
			}
		}
		if time.Now().After(deadline) {
			return &apiError{status: http.StatusServiceUnavailable, retryAfter: 5, msg: fmt.Sprintf("job %q: production did not restart in time: attach again", j.name)}
		}
		time.Sleep(5 * time.Millisecond)
	}
}
