package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/iceberg"
)

// Rows deleted by an Iceberg snapshot's position deletes (package
// iceberg, deletes.go) are dropped before anything else sees them: the
// early decode, the ops, the output of a job without a pipeline. A
// deleted row is a row of its data file by position; once the job is
// planned, each unit gets its own deleted rows (decode.Unit.Deleted,
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

// deletionsFor returns the rows the tables' deletes remove from the data
// files in paths (those a job plans), by path: their position deletes,
// and their equality deletes turned into positions (iceberg.EqualityDeleted
// reads the affected files' equality columns).
func deletionsFor(ctx context.Context, fsys decode.FS, tables []iceberg.Input, paths []string) (map[string][]int64, error) {
	byFile := iceberg.Deletes(tables)
	eq, err := iceberg.EqualityDeleted(ctx, fsys, tables, paths)
	if err != nil {
		return nil, err
	}
	if len(eq) > 0 && byFile == nil {
		byFile = map[string][]int64{}
	}
	for file, pos := range eq {
		byFile[file] = pos // its position deletes included
	}
	return byFile, nil
}

// setDeletions gives plan's units the rows byFile (sorted positions in
// each file) deletes, and returns how many it found. paths are the names
// the plan was made from: each one with deletions must name a planned
// file as the table does, or its deletions would go unapplied.
func setDeletions(plan *decode.Plan, byFile map[string][]int64, paths []string) (int64, error) {
	if len(byFile) == 0 {
		return 0, nil
	}
	planned := make(map[string]bool, len(plan.Files))
	for _, f := range plan.Files {
		planned[f.Path] = true
	}
	for _, p := range paths {
		if _, ok := byFile[p]; ok && !planned[p] {
			return 0, fmt.Errorf("BUG: the table's data file %s, which has position deletes, was planned under another name: its deletes would not apply", p)
		}
	}
	starts, err := groupStarts(plan, byFile)
	if err != nil {
		return 0, err
	}
	var n int64
	for i := range plan.Units {
		u := &plan.Units[i]
		pos, ok := byFile[u.File]
		if !ok {
			continue
		}
		lo := starts[u.File][u.RowGroup] + u.RowStart
		hi := lo + u.Rows
		k, _ := slices.BinarySearch(pos, lo) // the first position >= lo
		u.Deleted = nil
		for ; k < len(pos) && pos[k] < hi; k++ {
			u.Deleted = append(u.Deleted, int32(pos[k]-lo))
		}
		n += int64(len(u.Deleted))
	}
	return n, nil
}

// groupStarts returns, for each planned file with deletions, the row (in
// the file) where each of its row groups starts, and checks that its
// deletions lie within its rows.
func groupStarts(plan *decode.Plan, byFile map[string][]int64) (map[string][]int64, error) {
	rows := map[string][]int64{} // rows of each row group
	for _, u := range plan.Units {
		if _, ok := byFile[u.File]; !ok {
			continue
		}
		g := rows[u.File]
		for len(g) <= u.RowGroup {
			g = append(g, 0)
		}
		g[u.RowGroup] += u.Rows
		rows[u.File] = g
	}
	starts := make(map[string][]int64, len(rows))
	for file, g := range rows {
		s := make([]int64, len(g)+1)
		for i, n := range g {
			s[i+1] = s[i] + n
		}
		pos := byFile[file]
		if len(pos) == 0 {
			continue
		}
		if last := pos[len(pos)-1]; last >= s[len(g)] {
			return nil, fmt.Errorf("%s: the table's position deletes name its row %d, and it has %d rows: the file is not the one the snapshot recorded", file, last, s[len(g)])
		}
		starts[file] = s
	}
	return starts, nil
}

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
