package engine

import (
	"context"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
)

// Rows deleted by an Iceberg snapshot's position deletes (package
// iceberg, deletes.go) are dropped before anything else sees them: the
// early decode, the ops, the output of a job without a pipeline. A
// deleted row is a row of its data file by position; once the job is
// planned, each unit gets its own deleted rows (iceberg.SetDeletions into decode.Unit.Deleted,
// from its file, its row group's first row in the file and its first row
// in the row group), and whoever computes the unit drops those: a local
// worker, or a CPU peer, which gets them with the unit (peer.Ticket of
// protocol version 2, which a peer too old to drop them refuses).
//
// The row groups' first rows come from the plan: the rows of a file's
// units, row group by row group. A position past its file's planned rows
// fails the job (the file is not the one the snapshot recorded).
//
// Deletions make the job's row counts unknown until its units run, as a
// filter does: the processor is not exact, and a unit's count comes from
// its selection (count).

// withoutDeleted returns the rows of u to read, given cand (the page
// index's candidates, nil: every row), less u's deleted ones: cand
// itself (nil when u has none), or w.cand holding them.
func (w *unitWorker) withoutDeleted(u *decode.Unit, cand []int32) []int32 {
	del := u.Deleted
	if len(del) == 0 {
		return cand
	}
	if cand == nil {
		if w.cand == nil {
			w.cand = make([]int32, 0, u.Rows) // not nil even if every row is deleted: nil means every row
		}
		w.cand = w.cand[:0]
		for r, k := int32(0), 0; r < int32(u.Rows); r++ {
			if k < len(del) && del[k] == r {
				k++
				continue
			}
			w.cand = append(w.cand, r)
		}
		return w.cand
	}
	out, k := cand[:0], 0
	for _, r := range cand {
		for k < len(del) && del[k] < r {
			k++
		}
		if k < len(del) && del[k] == r {
			continue
		}
		out = append(out, r)
	}
	return out
}

// decodeKept decodes u's rows less the deleted ones into out: a job
// without a pipeline, on a unit with deletions.
func (p *processor) decodeKept(ctx context.Context, w *unitWorker, u decode.Unit, out *column.Batch) error {
	if err := w.dec.Open(ctx, u); err != nil {
		return err
	}
	sel := w.withoutDeleted(&u, nil)
	if len(sel) == 0 {
		emptyBatch(out)
		return nil
	}
	nf := len(p.plan.Fields)
	if cap(out.Columns) < nf {
		out.Columns = make([]column.Column, nf)
	}
	out.Columns = out.Columns[:nf]
	for fi := range nf {
		if err := w.dec.DecodeColumn(fi, sel, &out.Columns[fi]); err != nil {
			return err
		}
	}
	out.Rows = len(sel)
	return p.fillPartitions(u, out)
}
