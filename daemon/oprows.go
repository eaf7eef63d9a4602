package daemon

import "github.com/lastmile/lastmile/ops"

// Rows in and out of a job's row-dropping ops (ops.OpRows), for
// lastmile_op_rows_in_total and _out_total: the runs that ended add up in
// Job.opBase, the running one's are read live.

// addOpRows adds a run's counts to those of the job's runs that ended.
// j.mu is held.
func (j *Job) addOpRowsLocked(rows []ops.OpRows) {
	if len(rows) == 0 {
		return
	}
	if j.opBase == nil {
		j.opBase = map[string]ops.OpRows{}
	}
	for _, r := range rows {
		t := j.opBase[r.Op]
		t.Op, t.Line = r.Op, r.Line
		t.In += r.In
		t.Out += r.Out
		j.opBase[r.Op] = t
	}
}

// opRowsLocked returns the job's counts so far, the running run's
// included, in spec order of the running run's ops (then the others'). j.mu
// is held.
func (j *Job) opRowsLocked() []ops.OpRows {
	var live []ops.OpRows
	if r := j.liveLocked(); r != nil {
		live = r.prog.OpRows()
	}
	seen := map[string]bool{}
	var out []ops.OpRows
	for _, r := range live {
		t := j.opBase[r.Op]
		r.In += t.In
		r.Out += t.Out
		out = append(out, r)
		seen[r.Op] = true
	}
	for op, t := range j.opBase {
		if !seen[op] {
			out = append(out, t)
		}
	}
	return out
}
