package engine

import (
	"slices"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/expr"
	"github.com/lastmile/lastmile/ops"
)

// Ruling out rows by the page index. Row-group pruning (prune.go) skips
// a unit whose statistics let no row pass the filters; within a unit
// that some row may pass, the ColumnIndex of each early column
// (decode.PageBounds) gives the same statistics page by page. Event
// tables are often written in time order and user tables by user, so a
// filter on a time window or an id range has whole pages to rule out.
//
// Steps, for one unit on its worker (candidates):
//  1. Each early file column with a ColumnIndex gives its pages: the
//     unit rows each holds and their bounds. Columns without one, late
//     columns and partition columns (their one value is the unit's)
//     take part as row-group pruning has them: not at all, or as the
//     unit's own value.
//  2. The page boundaries of all those columns cut the unit into
//     segments; within a segment every column is in one page. A segment
//     is ruled out when the filters cannot pass with each column's page
//     bounds (ops.Program.Prune). A page's bounds cover its whole page,
//     so they hold for any segment of it.
//  3. Unless they rule out less than an eighth of the unit's rows
//     (minRuledOut), the rows of the segments left are the candidates:
//     the early columns are decoded for them only (a selection, whose
//     pages holding no candidate are neither read nor decompressed), the ops
//     select among them, and the rows kept are candidates' rows.
//
// The output is unchanged: a ruled-out row is one the filters would
// drop, the ops are row-local (a row's result depends on that row alone)
// and the kept rows keep their order. So a run with the index gives the
// batches of one without, and a peer, which decodes a unit the same
// way, gives the same as the host (TestPageFilter). Ruled-out rows do
// not count as the filter's drops in the ops' row counts, as pruned
// units do not.
//
// Rejected: ruling out pages of the late columns by their own indexes.
// The selection does that already (pageindex.go): a late page holding no
// kept row is skipped.

// candidates returns the rows of the open unit u that the job's filters
// may keep by its early columns' page indexes, in order, or nil when
// the indexes rule out none.
func (w *unitWorker) candidates(p *processor, u *decode.Unit) ([]int32, error) {
	if neverPrune.Load() || len(p.filterCols) == 0 {
		return nil, nil
	}
	cols, cuts, err := w.pageBounds(p, u)
	if err != nil || len(cols) == 0 {
		return nil, err
	}
	at := make([]int, len(cols)) // each column's page at the segment
	ruled := false
	if w.cand == nil {
		w.cand = make([]int32, 0, u.Rows) // not nil even if every row is ruled out: nil means every row
	}
	w.cand = w.cand[:0]
	for s := 0; s+1 < len(cuts); s++ {
		a, b := cuts[s], cuts[s+1]
		for c := range cols {
			for at[c] < len(cols[c].pages) && cols[c].pages[at[c]].End <= a {
				at[c]++
			}
		}
		stats := func(name string) (expr.Range, bool) {
			for c := range cols {
				if cols[c].name != name {
					continue
				}
				if at[c] == len(cols[c].pages) || cols[c].pages[at[c]].First > a {
					return expr.Range{}, false // a row the index does not cover
				}
				pg := &cols[c].pages[at[c]]
				return boundsRange(pg.Bounds, pg.Rows)
			}
			return unitStats(p.plan, u)(name)
		}
		if !p.prog.Prune(stats) {
			ruled = true
			continue
		}
		for r := a; r < b; r++ {
			w.cand = append(w.cand, int32(r))
		}
	}
	if !ruled || int64(len(w.cand)) > u.Rows-u.Rows/minRuledOut {
		return nil, nil
	}
	p.noteRuledOut(u.Rows - int64(len(w.cand)))
	return w.cand, nil
}

// minRuledOut: the page index is used when it rules out at least
// 1/minRuledOut of a unit's rows. Decoding the early columns for a
// selection costs more a row than decoding them whole, so ruling out a
// sliver would not pay for it (BenchmarkPageFilter with seven eighths
// kept: 217-260 ms against 230-243 ms decoding every page, no gain).
const minRuledOut = 8

// noteRuledOut counts n rows ruled out by page indexes.
func (p *processor) noteRuledOut(n int64) {
	p.ruledOut.Add(n)
	if p.progress != nil {
		p.progress.RowsRuledOut.Add(n)
	}
}

// filterColumns returns the input columns whose statistics prog's
// filters can use: those Prune asks about. Only their page indexes are
// read.
func filterColumns(prog *ops.Program) map[string]bool {
	cols := map[string]bool{}
	prog.Prune(func(name string) (expr.Range, bool) {
		cols[name] = true
		return expr.Range{}, false
	})
	return cols
}

// pageCol is an early column's pages, by its ColumnIndex.
type pageCol struct {
	name  string
	pages []decode.PageBounds
}

// pageBounds returns the early file columns of u that have more than one
// page with bounds (one page says no more than the row group's
// statistics), and every page boundary among them with 0 and the unit's
// rows, sorted.
func (w *unitWorker) pageBounds(p *processor, u *decode.Unit) ([]pageCol, []int64, error) {
	var cols []pageCol
	cuts := []int64{0, u.Rows}
	for _, fi := range p.early {
		if fi >= len(p.plan.Fields) || !p.filterCols[p.plan.Fields[fi].Name] {
			continue // a partition column (one value for the unit), or one no filter reads
		}
		pages, err := w.dec.PageBounds(fi)
		if err != nil {
			return nil, nil, err
		}
		if len(pages) < 2 {
			continue
		}
		cols = append(cols, pageCol{name: p.plan.Fields[fi].Name, pages: pages})
		for _, pg := range pages {
			cuts = append(cuts, pg.First, pg.End)
		}
	}
	slices.Sort(cuts)
	return cols, slices.Compact(cuts), nil
}
