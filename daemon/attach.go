package daemon

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
)

// attachRequest is POST /v1/jobs/{id}/attach's body.
type attachRequest struct {
	Rank   *int           `json:"rank"`
	Cursor *engine.Cursor `json:"cursor"`
	Wait   *float64       `json:"wait"`
}

// attachResponse tells a trainer rank which ring to open.
type attachResponse struct {
	Job        string         `json:"job"`
	Rank       int            `json:"rank"`
	Ring       string         `json:"ring"`
	Dir        string         `json:"dir"`
	Generation uint64         `json:"generation"`
	Next       *engine.Cursor `json:"next"`
	Restarted  bool           `json:"restarted"`
}

// attach answers a trainer rank: wait for the job's rings, restart
// production if the trainer needs another batch than its ring offers next,
// and name the ring.
func (j *Job) attach(ctx context.Context, req attachRequest) (attachResponse, error) {
	var resp attachResponse
	first, last := j.rankBase, j.rankBase+j.local-1 // this host's world ranks
	if req.Rank == nil {
		return resp, errorf(http.StatusBadRequest, `"rank" is required: %d to %d`, first, last)
	}
	world := *req.Rank
	switch {
	case world < 0 || world >= j.spec.WorldSize:
		return resp, errorf(http.StatusBadRequest, "rank %d out of range: job %q has world size %d (ranks 0 to %d)",
			world, j.name, j.spec.WorldSize, j.spec.WorldSize-1)
	case world < first || world > last:
		return resp, errorf(http.StatusBadRequest, "rank %d runs on another host: this lastmiled serves host %d of %d for job %q, ranks %d to %d; "+
			"attach to the lastmiled of the host the rank runs on", world, j.hosts.Index, j.hosts.Count, j.name, first, last)
	}
	rank := world - j.rankBase // the index of this host's rings and rank records
	if c := req.Cursor; c != nil {
		if e := j.spec.EpochCount(); e > 0 && c.Epoch >= uint64(e) {
			j.pastEnd(rank)
			return resp, errorf(http.StatusBadRequest, "cursor epoch %d: job %q has %d epochs (0 to %d); rank %d has nothing left to read",
				c.Epoch, j.name, e, e-1, world)
		}
		if steps := uint64(max(j.spec.WorldSize, 1)) * uint64(max(j.spec.Batch.Size, 1)); c.Batch > uint64(math.MaxInt64)/steps {
			// The rows before it would overflow: no epoch has such a batch.
			return resp, errorf(http.StatusBadRequest, "cursor batch %d: past any epoch of job %q (world size %d, batch size %d); resume from a checkpoint's cursor",
				c.Batch, j.name, j.spec.WorldSize, j.spec.Batch.Size)
		}
	}
	wait := 60 * time.Second
	if req.Wait != nil {
		if *req.Wait < 0 || *req.Wait > 600 {
			return resp, errorf(http.StatusBadRequest, `"wait" %v: want 0 to 600 seconds`, *req.Wait)
		}
		wait = time.Duration(*req.Wait * float64(time.Second))
	}
	if j.d.draining.Load() {
		return resp, &apiError{status: http.StatusServiceUnavailable, retryAfter: 5, msg: "lastmiled is shutting down: attach again when it is back"}
	}
	j.attachMu.Lock()
	defer j.attachMu.Unlock()
	if err := j.waitReady(ctx, wait); err != nil {
		return resp, err
	}
	info, err := j.rankInfo(rank)
	if err != nil {
		return resp, err
	}
	if info.ConsumerAttached {
		return resp, errorf(http.StatusConflict, "rank %d's ring already has a consumer (pid %d): close it before attaching again", world, info.ConsumerPID)
	}
	j.mu.Lock()
	j.lastActive = time.Now()
	start, st := j.ranks[rank].Start, j.state
	j.mu.Unlock()
	stand, known := standing(info, start)
	if req.Cursor != nil && (!known || !sameBatch(*req.Cursor, stand, info)) {
		if st != Running && st != Pending && st != Done {
			return resp, errorf(http.StatusConflict, "job %q is %s: its rings cannot be regenerated from cursor %+v; submit it again", j.name, st, *req.Cursor)
		}
		if j.d.draining.Load() {
			return resp, &apiError{status: http.StatusServiceUnavailable, retryAfter: 5, msg: "lastmiled is shutting down: attach again when it is back"}
		}
		j.log.Info("restarting production for a trainer's cursor", "rank", world, "cursor", *req.Cursor, "ring_next", stand, "ring_next_known", known, "state", st)
		restart := j.restartFrom
		if st == Done {
			restart = j.revive // a trainer died in the last ring-full (revive.go)
		}
		if err := restart(ctx, rank, *req.Cursor, wait); err != nil {
			return resp, err
		}
		if info, err = j.rankInfo(rank); err != nil {
			return resp, err
		}
		resp.Restarted = true
		j.mu.Lock()
		start = j.ranks[rank].Start
		j.mu.Unlock()
		stand, known = standing(info, start)
	}
	j.mu.Lock()
	j.ranks[rank].PastEnd = false
	j.mu.Unlock()
	resp.Job, resp.Rank, resp.Ring, resp.Dir, resp.Generation = j.id, world, j.ringName(rank), j.spec.Ring.Dir, info.Generation
	if known {
		resp.Next = &stand
	}
	j.log.Info("trainer attached", "rank", world, "ring", resp.Ring, "generation", resp.Generation, "next", stand, "restarted", resp.Restarted)
	return resp, nil
}

// pastEnd records that rank's trainer stands past the job's last epoch (a
// checkpoint taken at its end, the training script run again). Once every
// rank of this host says so and no trainer reads a ring, the job produces
// for nobody: a submission made it anew for trainers that have nothing
// left to read. It is canceled, saying why, and its rings removed, rather
// than holding its memory and its name until the grace period.
func (j *Job) pastEnd(rank int) {
	j.mu.Lock()
	if rank < len(j.ranks) {
		j.ranks[rank].PastEnd = true
	}
	all := j.state == Pending || j.state == Running
	for _, r := range j.ranks {
		all = all && r.PastEnd
	}
	j.mu.Unlock()
	if !all {
		return
	}
	if infos, _ := j.ringInfos(); slices.ContainsFunc(infos, func(in shm.RingInfo) bool { return in.ConsumerAttached }) {
		return
	}
	msg := "every rank's trainer stands past the job's last epoch: nothing is left to produce for them"
	j.log.Info("canceling a job nobody needs", "reason", msg)
	j.cancel("lastmiled: " + msg)
	j.removeRings(time.Time{})
}

// sameBatch reports whether the trainer's cursor names the batch its ring
// stands at. Besides equality, a trainer that counts (e, i+1) after the
// last batch i of epoch e means (e+1, 0): the ring's previous batch says
// whether i was the epoch's last.
func sameBatch(c, stand engine.Cursor, info shm.RingInfo) bool {
	if c == stand {
		return true
	}
	p := info.Prev
	return info.HasPrev && p.Flags&shm.FlagLastInEpoch != 0 && stand == (engine.Cursor{Epoch: p.Epoch + 1}) &&
		c == (engine.Cursor{Epoch: p.Epoch, Batch: p.BatchIndex + 1})
}

// rankInfo snapshots rank r's ring through the job's observer.
func (j *Job) rankInfo(r int) (shm.RingInfo, error) {
	j.mu.Lock()
	var o *shm.Observer
	if r < len(j.obs) {
		o = j.obs[r]
	}
	j.mu.Unlock()
	if o == nil || o.Replaced() {
		info, err := shm.Inspect(j.spec.Ring.Dir, j.ringName(r))
		if err != nil {
			return info, errorf(http.StatusConflict, "rank %d's ring is not available: %v", j.rankBase+r, err)
		}
		return info, nil
	}
	return o.Info(), nil
}

// waitReady waits until the job's current run has its rings, or the job
// ended with its rings still in place (done: the trainer may read the
// rest); it fails for a job that failed or was canceled.
func (j *Job) waitReady(ctx context.Context, wait time.Duration) error {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		j.mu.Lock()
		st, r, msg, removed := j.state, j.run, j.errMsg, j.removed
		j.mu.Unlock()
		switch {
		case st == Done && !removed:
			return nil
		case st == Done:
			return errorf(http.StatusConflict, "job %q is done and its rings were removed", j.name)
		case st.Terminal():
			return errorf(http.StatusConflict, "job %q %s: %s", j.name, st, msg)
		}
		var ready, done <-chan struct{}
		if r != nil {
			ready, done = r.ready, r.done
		}
		poll := time.After(20 * time.Millisecond)
		if r != nil {
			poll = nil
		}
		select {
		case <-ready:
			// A run that is being stopped is ready too; the caller sees the
			// rings as they stand, which the next run adopts.
			return nil
		case <-done:
		case <-poll:
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return &apiError{status: http.StatusServiceUnavailable, retryAfter: 5,
				msg: fmt.Sprintf("job %q: its rings do not exist yet after %v (planning large inputs?): attach again", j.name, wait)}
		}
	}
}

// restartFrom restarts production so that rank continues exactly from
// cursor and every other rank from where its ring stands: their rings are
// handed over to the new run (same generation and head), rank's ring is
// recreated. It returns once the new run's rings exist.
func (j *Job) restartFrom(ctx context.Context, rank int, cursor engine.Cursor, wait time.Duration) error {
	j.mu.Lock()
	old := j.latest
	j.mu.Unlock()
	err := j.stopRun("restart", func(infos []shm.RingInfo) {
		j.mu.Lock()
		defer j.mu.Unlock()
		resume := make([]engine.Cursor, j.local)
		for k := range resume {
			switch {
			case k == rank:
				resume[k] = cursor
			case k < len(infos) && infos[k].HasLast:
				resume[k] = engine.NextCursor(infos[k].Last)
			case k < len(infos):
				resume[k] = j.ranks[k].Start
			case k < len(j.next):
				resume[k] = j.next[k] // no rings yet: as the run was going to start
			}
		}
		// The rank's ring starts afresh: give up its claim so that the
		// next run creates it.
		shm.Unclaim(j.spec.Ring.Dir, j.ringName(rank))
		j.next = resume
		j.restarts++
	})
	if err != nil {
		return errorf(http.StatusConflict, "restart job %q: %v", j.name, err)
	}
	return j.waitNewRun(ctx, old, wait, "restarted")
}

// cancel stops the job for good: its rings get msg as their error.
func (j *Job) cancel(msg string) {
	j.attachMu.Lock()
	defer j.attachMu.Unlock()
	j.mu.Lock()
	if j.state.Terminal() {
		j.mu.Unlock()
		return
	}
	j.cancelMsg = msg
	j.mu.Unlock()
	if err := j.stopRun("cancel", nil); err != nil {
		j.log.Debug("cancel", "err", err)
	}
	<-j.finishedCh()
}
