package daemon

import (
	"time"

	"github.com/lastmile/lastmile/engine"
)

// A job's counters over its runs: progressTotals holds those of the runs
// that ended (Job.base), and readers add the running run's (liveLocked)
// to them. A run's counters are folded into base once, when it returns
// (foldLocked).

// liveLocked is the job's run whose counters are not in j.base yet, or
// nil. Callers hold j.mu.
func (j *Job) liveLocked() *run {
	if r := j.run; r != nil && !r.folded {
		return r
	}
	return nil
}

// foldLocked adds the ended run r's counters to the job's: its totals,
// rows per op, and each ring's batches and waits. Callers hold j.mu.
func (j *Job) foldLocked(r *run) {
	j.lastEpoch = r.prog.Epoch.Load()
	j.base.add(r.prog)
	j.addOpRowsLocked(r.prog.OpRows())
	for i, st := range r.prog.RingStats() {
		if i < len(j.published) {
			j.published[i] += st.Published
			j.fullWait[i] += st.FullWait
		}
	}
	r.folded = true
}

type progressTotals struct {
	rows, batches, bytes, units int64
	spilled, hedged, hedgesWon  int64
	verified, mismatches        int64 // spilled units verified here, and those that differed
	decode, pack                time.Duration
	// Late columns' data pages decoded and left unread, and the unread
	// ones' compressed bytes (engine.LatePages).
	latePages, lateUnread, lateUnreadBytes int64
	arenaUnits, arenaHeap                  int64 // units decoded into the unit arena, and to the heap
	// What the plan left out by the job's filters: the last run's (every
	// run plans the same inputs).
	filesPruned, unitsPruned int64
	rowsRuledOut             int64 // by the filters' page indexes, in units read
	rowsDeleted              int64 // by the tables' deletes, in the plan (the last run's)
}

func (t *progressTotals) add(p *engine.Progress) {
	t.rows += p.Rows.Load()
	t.batches += p.Batches.Load()
	t.bytes += p.Bytes.Load()
	t.units += p.UnitsDone.Load()
	t.filesPruned, t.unitsPruned = p.FilesPruned.Load(), p.UnitsPruned.Load()
	t.rowsRuledOut += p.RowsRuledOut.Load()
	t.rowsDeleted = p.RowsDeleted.Load()
	t.spilled += p.UnitsSpilled.Load()
	t.hedged += p.UnitsHedged.Load()
	t.hedgesWon += p.HedgesWon.Load()
	t.verified += p.UnitsVerified.Load()
	t.mismatches += p.VerifyMismatches.Load()
	lp := p.LatePages()
	t.latePages += lp.Pages
	t.lateUnread += lp.PagesUnread
	t.lateUnreadBytes += lp.BytesUnread
	in, heap := p.ArenaUnits()
	t.arenaUnits += in
	t.arenaHeap += heap
	t.decode += time.Duration(p.DecodeNanos.Load())
	// The engine's pack time leaves out its sleeps on full rings, which
	// lastmile_producer_full_wait_seconds_total counts apart.
	t.pack += time.Duration(p.PackNanos.Load())
}
