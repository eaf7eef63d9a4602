package daemon

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Per-user bounds (config limits.*): one user must not be able to take
// the memory and shm that the host's other users' jobs need. A job counts
// against its owner (and memory.total) while it holds or will hold rings:
// pending, running, or ended (done, canceled or failed) with its rings
// still in shm_dir, until they are removed (read to their end, the grace
// period, or at once for a canceled job no trainer reads: releaseUnread).
// Otherwise a user at the bound could submit, cancel and submit again,
// leaving a full set of rings behind each time. Joining a job that exists
// costs nothing. Root and the admin group are exempt: they are trusted
// with the whole host already.

// userHold is what one uid's jobs hold.
type userHold struct {
	jobs  []string // "name (id)" of each job, oldest first
	bytes int64    // their memory charge
	ended int      // of them, jobs that ended and whose rings are not removed yet
}

// holdsRings reports whether j's rings exist or will: it counts against
// its owner's limits and memory.total. j.mu is held.
func holdsRings(j *Job) bool { return !j.removed }

// holdLocked sums uid's jobs that hold rings. Called with d.mu held.
func (d *Daemon) holdLocked(uid uint32) userHold {
	var h userHold
	for _, j := range d.jobs {
		if j.owner != uid {
			continue
		}
		j.mu.Lock()
		holds := holdsRings(j)
		fp, st, ended := j.footprint, j.state, j.ended
		j.mu.Unlock()
		if holds {
			what := fmt.Sprintf("%s (%s)", j.name, j.id)
			if st.Terminal() {
				until := ""
				if !ended.IsZero() {
					until = fmt.Sprintf(", or until %s at the latest", ended.Add(d.Config().Grace.D()).UTC().Format(time.RFC3339))
				}
				what = fmt.Sprintf("%s (%s, %s: its rings are kept until read to their end%s)", j.name, j.id, st, until)
				h.ended++
			}
			h.jobs = append(h.jobs, what)
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
			"uid %d holds %d jobs, the most one user may (config limits.jobs_per_user = %d): cancel one (lastmile cancel ID), then submit %q again; %s. Yours: %s",
			uid, len(h.jobs), n, name, endedHold(h), listJobs(h.jobs))
	}
	if m := int64(lim.MemoryPerUser); m > 0 && h.bytes+need > m {
		return errorf(http.StatusTooManyRequests,
			"job %q needs %s but uid %d's jobs hold %s of the %s one user may (config limits.memory_per_user): cancel one of them (lastmile cancel ID), or use fewer or smaller ring slots, a smaller batch, or a lower decode.inflight; %s. Yours: %s",
			name, Bytes(need), uid, Bytes(h.bytes), Bytes(m), endedHold(h), listJobs(h.jobs))
	}
	return nil
}

// endedHold says how ended jobs count, for a limit's error.
func endedHold(h userHold) string {
	s := "an ended job counts until its rings are removed: at once when it is canceled with no trainer reading its rings, else once its trainers have read them to their end or detached (canceled), or after the grace period"
	if h.ended > 0 {
		s = fmt.Sprintf("%d of yours ended and still hold their rings (%s)", h.ended, s)
	}
	return s
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
