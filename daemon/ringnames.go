package daemon

// Job and ring names across jobs: what a submission joins, and which ring
// files two jobs would both create.

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lastmile/lastmile/spec"
)

// sameName returns the active job the submission joins, or an error if the
// name or a ring name is taken. Called with d.mu held.
func (d *Daemon) sameName(job *spec.Job, hash string, uid uint32) (*Job, error) {
	for _, ex := range d.jobs {
		ex.mu.Lock()
		live := !ex.state.Terminal() || ex.state == Done && !ex.removed
		ex.mu.Unlock()
		if !live {
			continue
		}
		if ex.name == job.Name {
			switch {
			case ex.owner != uid:
				return nil, errorf(http.StatusConflict, "job %q exists and belongs to uid %d: choose another name", job.Name, ex.owner)
			case ex.hash != hash:
				return nil, errorf(http.StatusConflict, "job %q exists with another spec (%s): cancel it first (lastmile cancel %s), or choose another name", job.Name, ex.hash, ex.id)
			}
			return ex, nil
		}
	}
	if ex, file := d.ringConflictLocked(job, uid, ""); ex != nil {
		return nil, d.ringConflictError(job, ex, file)
	}
	return nil, nil
}

// ringConflictLocked returns a job other than one named skip (the job
// being added) whose ring files have a name one of job's would have, and
// that name: jobs whose rings exist or will (pending, running, done until
// removed), and other users' ended jobs of other names whose rings are not
// removed yet (job's owner could not replace them). uid's own ended jobs
// are not, nor ended jobs of job's name (whose name is free): a new job
// replaces their rings. Called with d.mu held.
func (d *Daemon) ringConflictLocked(job *spec.Job, uid uint32, skip string) (*Job, string) {
	for _, ex := range d.jobs {
		if skip != "" && ex.name == skip {
			continue
		}
		ex.mu.Lock()
		live := !ex.state.Terminal() || ex.state == Done && !ex.removed
		held := ex.state.Terminal() && !ex.removed && ex.owner != uid
		ex.mu.Unlock()
		if !live && (!held || ex.name == job.Name) {
			continue
		}
		if file, ok := ringFilesCollide(job, ex.spec); ok {
			return ex, file
		}
	}
	return nil, ""
}

// ringConflictError is the 409 of a submission whose ring file is ex's.
func (d *Daemon) ringConflictError(job *spec.Job, ex *Job, file string) error {
	what := fmt.Sprintf("ring name %q is used by job %q", job.Ring.Name, ex.name)
	if job.Ring.Name != ex.spec.Ring.Name {
		what = fmt.Sprintf("ring.name %q (world_size %d) names ring file %q, which job %q's ring.name %q (world_size %d) names too",
			job.Ring.Name, max(job.WorldSize, 1), file, ex.name, ex.spec.Ring.Name, max(ex.spec.WorldSize, 1))
	}
	ex.mu.Lock()
	st, ended := ex.state, ex.ended
	ex.mu.Unlock()
	if st.Terminal() && !ended.IsZero() {
		what += fmt.Sprintf(" (%s; its rings stay until read to their end, or until %s at the latest)",
			st, ended.Add(d.Config().Grace.D()).UTC().Format(time.RFC3339))
	}
	return errorf(http.StatusConflict, "%s: set another ring.name", what)
}

// ringFilesCollide reports whether a rank of a and a rank of b have the
// same ring file name (spec.Job.RingName: RING with world_size 1, RING.rR
// otherwise), and which, without listing up to 4096 names per job. Every
// rank of every host counts: a host may hold any of them.
func ringFilesCollide(a, b *spec.Job) (string, bool) {
	multi := func(j *spec.Job) bool { return j.WorldSize > 1 }
	switch {
	case !multi(a) && !multi(b):
		return a.Ring.Name, a.Ring.Name == b.Ring.Name
	case multi(a) && multi(b):
		// RING.rI == RING'.rJ: the digits after the last ".r" hold no
		// '.', so RING == RING' (and rank 0 of both).
		return a.RingName(0), a.Ring.Name == b.Ring.Name
	case multi(a):
		a, b = b, a
	}
	// a: one ring; b: RING.r0 .. RING.r(world_size-1).
	rest, ok := strings.CutPrefix(a.Ring.Name, b.Ring.Name+".r")
	if !ok || rest == "" || len(rest) > 1 && rest[0] == '0' {
		return "", false
	}
	r, err := strconv.Atoi(rest)
	if err != nil || r < 0 || r >= b.WorldSize || strconv.Itoa(r) != rest {
		return "", false
	}
	return a.Ring.Name, true
}
