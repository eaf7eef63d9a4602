package daemon

import (
	"fmt"
	"net/http"
	"strings"
)

// Per-user bounds (config limits.*): one user must not be able to take
// the memory and shm that the host's other users' jobs need. A job counts
// against its owner while it holds or will hold rings: pending, running,
// or done with its rings still in place (until drained, or the grace
// period). Joining a job that exists costs nothing. Root and the admin
// group are exempt: they are trusted with the whole host already.

// userHold is what one uid's jobs hold.
type userHold struct {
	jobs  []string // "name (id)" of each job, oldest first
	bytes int64    // their memory charge
}

// holdLocked sums uid's jobs that hold rings. Called with d.mu held.
func (d *Daemon) holdLocked(uid uint32) userHold {
	var h userHold
	for _, j := range d.jobs {
		if j.owner != uid {
			continue
		}
		j.mu.Lock()
		holds := !j.removed && (!j.state.Terminal() || j.state == Done)
		fp := j.footprint
		j.mu.Unlock()
		if holds {
			h.jobs = append(h.jobs, fmt.Sprintf("%s (%s)", j.name, j.id))
			h.bytes += fp
		}
	}
	return h
}

// checkUserLimits refuses a new job of p at its bounds before the job is
// planned, so that a user at the bound costs no reading of footers. It
// returns whether p is exempt, for checkUserLimitsLocked.
func (d *Daemon) checkUserLimits(p peer, name string) (exempt bool, err error) {
	if d.isAdmin(p) {
		return true, nil
	}
	lim := d.Config().Limits
	d.mu.Lock()
	h := d.holdLocked(p.uid)
	d.mu.Unlock()
	return false, userLimitError(lim, p.uid, name, h, 0)
}

// checkUserLimitsLocked applies the bounds again, with the job's memory
// need, where the job is added (d.mu held: two submissions at once cannot
// both pass).
func (d *Daemon) checkUserLimitsLocked(uid uint32, exempt bool, name string, need int64) error {
	if exempt {
		return nil
	}
	return userLimitError(d.Config().Limits, uid, name, d.holdLocked(uid), need)
}

// userLimitError says why uid may not add a job needing need bytes to
// what it holds, nil if it may: 429, with what to do.
func userLimitError(lim LimitsConfig, uid uint32, name string, h userHold, need int64) error {
	if n := lim.JobsPerUser; n > 0 && len(h.jobs) >= n {
		return errorf(http.StatusTooManyRequests,
			"uid %d holds %d jobs, the most one user may (config limits.jobs_per_user = %d): cancel one (lastmile cancel ID; done jobs count until their rings are drained), then submit %q again. Yours: %s",
			uid, len(h.jobs), n, name, listJobs(h.jobs))
	}
	if m := int64(lim.MemoryPerUser); m > 0 && h.bytes+need > m {
		return errorf(http.StatusTooManyRequests,
			"job %q needs %s but uid %d's jobs hold %s of the %s one user may (config limits.memory_per_user): cancel one of them (lastmile cancel ID), or use fewer or smaller ring slots, a smaller batch, or a lower decode.inflight. Yours: %s",
			name, Bytes(need), uid, Bytes(h.bytes), Bytes(m), listJobs(h.jobs))
	}
	return nil
}

// listJobs lists at most 8 jobs for an error message.
func listJobs(jobs []string) string {
	if len(jobs) == 0 {
		return "none"
	}
	if len(jobs) > 8 {
		return strings.Join(jobs[:8], ", ") + fmt.Sprintf(" and %d more (lastmile jobs)", len(jobs)-8)
	}
	return strings.Join(jobs, ", ")
}
