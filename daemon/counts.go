package daemon

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/lastmile/lastmile/engine"
)

// The hosts' unit counts, relayed by the trainers.
//
// A job submitted with share_counts, one host's share of a world on
// several hosts, counts only its share of the units (engine/hostcounts.go)
// and needs the other hosts' counts before its first batch. lastmiled
// does not reach the other hosts' daemons for them: the job's trainers
// do, over the process group they already share. Steps:
//  1. The run counts its share and calls countExchange.wait, which
//     publishes the share and blocks.
//  2. Each trainer GETs /v1/jobs/{id}/counts, which long-polls until the
//     share (or the whole list, where this host knows it) is published.
//  3. The trainers all-gather every host's share and merge them: each
//     unit is counted by exactly one host.
//  4. Each host's first trainer POSTs the merged list. The first one
//     that checks out (every unit counted; once the share is counted, the
//     job's plan and this host's share unchanged) is kept in the job's
//     record and wakes the run; later equal ones are accepted, differing
//     ones refused. The run checks the list against its share (it may have
//     come first), deals the units by it, and Counted keeps it for every
//     later run.
//
// A daemon killed and restarted at any step loses nothing the trainers
// gave it: before step 4 they find its share again (a GET that fails
// waits for the daemon), after it the record holds their list, until the
// run has dealt by it and the record says so (unit_rows_dealt), and the
// restarted run, counting its share again, checks and takes it; or, once
// dealt, it deals as before or fails the job where it plans other units.
// No record between says only the counts: the restarted run would wait
// for a list the trainers, past their exchange, will not post again.
//
// A GET or POST counts as trainer activity, so a job whose trainers are
// still exchanging is not reclaimed for want of an attach. Trainers that
// never post leave the run waiting until the job is canceled or
// reclaimed: the daemon has no view of the other hosts to time them out
// by, and the trainers' collectives fail on their own where a host is
// gone.

// maxCountsWait is the longest a GET of a job's counts waits.
const maxCountsWait = 30 * time.Second

// countExchange is a job's side of step 1 and 4: the run's share, the
// merged list, and a channel closed at every change of either.
type countExchange struct {
	mu      sync.Mutex
	share   *engine.CountShare // this host's, once counted
	all     []int64            // every unit's rows, once posted
	allPlan string             // the plan all was posted for
	alone   bool               // the trainers cannot relay: count every unit here
	changed chan struct{}
}

// newCountExchange returns an exchange holding the list posted for plan
// (from the job's record: posted before a restart), or nothing.
func newCountExchange(plan string, all []int64, alone bool) *countExchange {
	x := &countExchange{changed: make(chan struct{}), alone: alone}
	if len(all) > 0 {
		x.all, x.allPlan = all, plan
	}
	return x
}

// posted returns the list taken and its plan, and whether the trainers
// asked this host to count alone, for the job's record.
func (x *countExchange) posted() (string, []int64, bool) {
	if x == nil {
		return "", nil, false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.allPlan, x.all, x.alone
}

// taken drops the posted list once a run has dealt its units (by it, or
// by counts it had): the job's unitRows, and its record's unit_rows_dealt,
// hold it from then on, and the record need not hold it twice. Not
// before: a record of the job's counts without the list nor the deal (a
// daemon killed in between) would not say that the trainers are past
// their exchange, and a restarted run that plans other units would wait
// for counts they will not post again. It reports whether it dropped a
// list.
func (x *countExchange) taken() bool {
	if x == nil {
		return false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	had := x.all != nil
	x.all, x.allPlan = nil, ""
	return had
}

// countAlone is the trainers' word that they cannot relay the counts:
// the run counts every unit itself (engine.ErrCountAlone).
func (x *countExchange) countAlone() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.alone {
		x.alone = true
		x.notify()
	}
}

// notify wakes every waiter; x.mu is held.
func (x *countExchange) notify() {
	close(x.changed)
	x.changed = make(chan struct{})
}

// wait is the run's engine.Options.ShareCounts: it publishes share and
// returns the list the trainers post, or ctx's error. A list posted
// before the share was counted (the trainers were quicker, or this daemon
// restarted after they posted) is checked now, and one that disagrees
// with the share fails the run: the trainers have moved on.
func (x *countExchange) wait(ctx context.Context, share engine.CountShare) ([]int64, error) {
	x.mu.Lock()
	x.share = &share
	x.notify()
	for x.all == nil && !x.alone {
		ch := x.changed
		x.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the other hosts' unit counts (their trainers relay them): %w", ctx.Err())
		}
		x.mu.Lock()
	}
	all, plan, alone := slices.Clone(x.all), x.allPlan, x.alone
	x.mu.Unlock()
	if all == nil && alone {
		return nil, fmt.Errorf("the trainers asked this host to count every unit: %w", engine.ErrCountAlone)
	}
	if err := checkShare(share, plan, all); err != nil {
		return nil, fmt.Errorf("the trainers' unit counts: %w", err)
	}
	return all, nil
}

// checkShare checks a list posted for plan against this host's share:
// the same plan, as many units, this host's own counts unchanged.
func checkShare(s engine.CountShare, plan string, rows []int64) error {
	switch {
	case plan != s.Plan:
		return errorf(http.StatusConflict, "the counts are for plan %s, but this host planned %s: every host must read the same input (an Iceberg table pinned to one snapshot, ?snapshot=ID)", plan, s.Plan)
	case len(rows) != len(s.Rows):
		return errorf(http.StatusBadRequest, `"rows" lists %d units, but the plan has %d`, len(rows), len(s.Rows))
	}
	for i, n := range rows {
		if s.Counts(i) && n != s.Rows[i] {
			return errorf(http.StatusConflict, `"rows"[%d] is %d, but this host counted %d rows in that unit: every host must read the same input`, i, n, s.Rows[i])
		}
	}
	return nil
}

// post takes the trainers' merged list for plan, from a job on hosts
// hosts: refused where a count is missing, where it differs from a list
// taken before, or, once this host has counted its share, where it does
// not fit the share (checkShare). Before that it is taken, and checked
// when the share is counted (wait).
func (x *countExchange) post(plan string, rows []int64, hosts int) error {
	if len(rows) == 0 {
		return errorf(http.StatusBadRequest, `"rows" is empty: post every unit's count`)
	}
	for i, n := range rows {
		if n < 0 {
			return errorf(http.StatusBadRequest, `"rows"[%d] is %d: every unit needs its count (host %d's to count)`, i, n, i%max(hosts, 1))
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if s := x.share; s != nil {
		if err := checkShare(*s, plan, rows); err != nil {
			return err
		}
	}
	if x.all != nil {
		if x.allPlan != plan || !slices.Equal(x.all, rows) {
			return errorf(http.StatusConflict, "the job already has other counts: every trainer must post the same merged list")
		}
		return nil
	}
	x.all, x.allPlan = slices.Clone(rows), plan
	x.notify()
	return nil
}

// shareCountsHook is the job's engine.Options.ShareCounts: nil unless it
// was submitted with share_counts.
func (j *Job) shareCountsHook() func(context.Context, engine.CountShare) ([]int64, error) {
	if !j.shareCounts {
		return nil
	}
	return func(ctx context.Context, s engine.CountShare) ([]int64, error) {
		j.log.Info("counted this host's share of the units: waiting for the other hosts' counts, which the trainers relay",
			"units", len(s.Rows), "hosts", s.Hosts, "plan", s.Plan)
		return j.exchange.wait(ctx, s)
	}
}

// countsView is what GET /v1/jobs/{id}/counts returns.
type countsView struct {
	// Plan is the units' digest (engine.PlanDigest): the same on every
	// host of the world.
	Plan  string `json:"plan"`
	Hosts int    `json:"hosts"`
	Host  int    `json:"host"`
	// Rows are each unit's rows, -1 for the units other hosts count; nil
	// until this host has counted its share.
	Rows []int64 `json:"rows"`
	// Counted: Rows is there (left out with ?rows=0, for a caller that
	// needs to know only that).
	Counted bool `json:"counted"`
	// Complete: Rows has every unit's count (the job's plan gives them, or
	// it has its counts from an earlier run or the trainers); nothing is
	// to be posted.
	Complete bool `json:"complete"`
	// State is the job's state: a terminal one means no counts will come.
	State State `json:"state"`
}

// counts returns what this host knows of its units' counts now, and a
// channel closed when that may change. v.Rows is shared, not copied (the
// job view asks on every call, and a plan may have millions of units):
// unitRows and a published share are replaced, never written in place.
func (j *Job) counts() (countsView, <-chan struct{}) {
	j.mu.Lock()
	v := countsView{Plan: j.planDigest, Hosts: max(j.hosts.Count, 1), Host: j.hosts.Index, State: j.state}
	// Complete once the current run has dealt its units (its steps per
	// epoch are known): the counts it kept, or found, are the ones it uses.
	// (An ended job's kept counts are the ones its runs used.)
	if len(j.unitRows) > 0 {
		dealt := j.state.Terminal()
		if r := j.run; r != nil && !dealt {
			_, dealt = r.prog.BatchesPerEpoch()
		}
		if dealt {
			v.Rows, v.Complete = j.unitRows, true
		}
	}
	j.mu.Unlock()
	x := j.exchange
	if x == nil {
		return v, nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if s := x.share; s != nil && !v.Complete {
		v.Plan, v.Rows = s.Plan, s.Rows
	}
	return v, x.changed
}

func (d *Daemon) getCounts(w http.ResponseWriter, r *http.Request) {
	j, err := d.hostsJob(r)
	if err != nil {
		writeError(w, err)
		return
	}
	wait := time.Duration(0)
	if s := r.URL.Query().Get("wait"); s != "" {
		sec, err := strconv.ParseFloat(s, 64)
		if err != nil || !(sec >= 0 && sec <= maxCountsWait.Seconds()*1e6) { // NaN and Inf too
			writeError(w, errorf(http.StatusBadRequest, "wait=%q: want seconds to wait for the counts, 0 to %v", s, maxCountsWait.Seconds()))
			return
		}
		wait = min(time.Duration(sec*float64(time.Second)), maxCountsWait)
	}
	rows := true
	switch s := r.URL.Query().Get("rows"); s {
	case "", "1", "true":
	case "0", "false":
		rows = false
	default:
		writeError(w, errorf(http.StatusBadRequest, "rows=%q: want 0 to leave the counts out of the answer, or 1", s))
		return
	}
	answer := func(v countsView) {
		v.Counted = v.Rows != nil
		if !rows {
			v.Rows = nil
		}
		writeJSON(w, http.StatusOK, v)
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	// A run that deals its units by counts it had changes nothing in the
	// exchange: the poll sees it.
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	finished := j.finishedCh()
	for {
		j.touch()
		v, changed := j.counts()
		if v.Rows != nil || v.State.Terminal() {
			answer(v)
			return
		}
		select {
		case <-changed:
		case <-finished:
			finished = nil // a revived job (revive.go) runs again: the poll sees it
		case <-poll.C:
		case <-deadline.C:
			answer(v)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// postCountsRequest is the body of POST /v1/jobs/{id}/counts: every
// unit's rows for a plan, or CountHere.
type postCountsRequest struct {
	Plan string  `json:"plan"`
	Rows []int64 `json:"rows"`
	// CountHere: the trainers cannot relay the counts (their process
	// group failed the exchange); this host counts every unit itself.
	CountHere bool `json:"count_here"`
}

func (d *Daemon) postCounts(w http.ResponseWriter, r *http.Request) {
	// The job and its owner first: only they may send a body of maxBody.
	j, err := d.hostsJob(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var req postCountsRequest
	if err := decodeBody(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	j.touch()
	if req.CountHere {
		if req.Plan != "" || req.Rows != nil {
			writeError(w, errorf(http.StatusBadRequest, `"count_here" goes alone: post either it or "plan" and "rows"`))
			return
		}
		j.exchange.countAlone()
		j.persist()
		j.log.Warn("the trainers cannot relay the hosts' unit counts: this host counts every unit itself")
		v, _ := j.counts()
		writeJSON(w, http.StatusOK, v)
		return
	}
	if v, _ := j.counts(); v.Complete {
		// Known already (an earlier run, the plan, another trainer's
		// post): the same list is a no-op, another one a mistake.
		if req.Plan != v.Plan || !slices.Equal(req.Rows, v.Rows) {
			writeError(w, errorf(http.StatusConflict, "the job already has its unit counts (plan %s), and they differ from these: every trainer must post the same merged list", v.Plan))
			return
		}
		writeJSON(w, http.StatusOK, v)
		return
	}
	if err := j.checkPostedPlan(r.Context(), req.Plan, len(req.Rows)); err != nil {
		writeError(w, err)
		return
	}
	if err := j.exchange.post(req.Plan, req.Rows, j.hosts.Count); err != nil {
		writeError(w, err)
		return
	}
	j.persist() // a restart before the run takes them keeps them
	j.log.Info("the hosts' unit counts arrived from a trainer", "units", len(req.Rows), "plan", req.Plan)
	v, _ := j.counts()
	v.Plan, v.Rows, v.Complete = req.Plan, req.Rows, true
	writeJSON(w, http.StatusOK, v)
}

// checkPostedPlan bounds a list the trainers post before this host has
// counted its share (after that, post checks it against the share): it
// is kept in the job's record, and re-written by every persist, so it may
// hold no more than the job's plan has units. A list for another plan
// than the one this host planned is refused (its run would refuse it).
// One posted before this host planned the job (a restarted daemon
// estimates it again, supervise) waits for that, up to maxCountsWait,
// then is a 503, which the trainers retry.
func (j *Job) checkPostedPlan(ctx context.Context, plan string, units int) error {
	x := j.exchange
	if x == nil || units == 0 {
		return nil // post refuses an empty list
	}
	x.mu.Lock()
	counted := x.share != nil
	x.mu.Unlock()
	if counted {
		return nil
	}
	planned := func() (string, int, bool) {
		j.mu.Lock()
		defer j.mu.Unlock()
		return j.planDigest, j.planUnits, j.state.Terminal()
	}
	digest, n, ended := planned()
	if digest == "" || n <= 0 {
		deadline := time.NewTimer(maxCountsWait)
		defer deadline.Stop()
		poll := time.NewTicker(50 * time.Millisecond)
		defer poll.Stop()
	wait:
		for (digest == "" || n <= 0) && !ended {
			select {
			case <-poll.C:
				digest, n, ended = planned()
			case <-deadline.C:
				break wait
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	switch {
	case digest == "" || n <= 0:
		return &apiError{status: http.StatusServiceUnavailable, retryAfter: 5, msg: fmt.Sprintf(
			"job %s: this host has not planned the job yet (the daemon restarted): post the counts again in a few seconds", j.id)}
	case plan != digest:
		return errorf(http.StatusConflict, "the counts are for plan %s, but this host planned %s: every host must read the same input (an Iceberg table pinned to one snapshot, ?snapshot=ID)", plan, digest)
	case units != n:
		return errorf(http.StatusBadRequest, `"rows" lists %d units, but the plan has %d`, units, n)
	}
	return nil
}

// touch notes trainer activity: the job is not reclaimed while its
// trainers exchange counts before they attach.
func (j *Job) touch() {
	j.mu.Lock()
	j.lastActive = time.Now()
	j.mu.Unlock()
}

// countsState is the job view's counts: "" on one host, else "known",
// "exchanging" or "counting".
func (j *Job) countsState() string {
	if j.hosts.Count <= 1 {
		return ""
	}
	switch v, _ := j.counts(); {
	case v.Complete:
		return "known"
	case v.Rows != nil:
		return "exchanging"
	}
	return "counting"
}

// hostsJob is the request's job (Daemon.lookup), refused (409) where it
// runs on one host: it deals no units, so it has no counts to exchange.
func (d *Daemon) hostsJob(r *http.Request) (*Job, error) {
	j, err := d.lookup(r)
	if err == nil && j.hosts.Count <= 1 {
		err = errorf(http.StatusConflict, "job %s runs on one host: it has no unit counts to exchange", j.id)
	}
	return j, err
}
