package engine

import (
	"math"
	"sync/atomic"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/expr"
	"github.com/lastmile/lastmile/ops"
)

// Row-group pruning: a unit whose row group statistics (decode.Bounds)
// let no row pass the job's filters yields no rows, so it is not read.
// It stays in the plan, at its place: unit order, shuffles, cursors and
// the batches are those of a run that reads it and drops every row, so
// pruning never changes what trainers get. A pruned unit is not fetched
// ahead, not sent to a peer, and not counted in the cost of a row here.

// neverPrune reads every unit, for tests to compare pruning against
// (SetNeverPruneForTest).
var neverPrune atomic.Bool

// pruneUnits returns which units of plan (by Seq) prog's filters rule
// out, and how many; nil when there is no filter to ask.
func pruneUnits(plan *decode.Plan, prog *ops.Program) ([]bool, int) {
	if prog == nil || neverPrune.Load() {
		return nil, 0
	}
	var skip []bool
	n := 0
	for i := range plan.Units {
		u := &plan.Units[i]
		if len(u.Bounds) != len(plan.Fields) || prog.Prune(unitStats(plan, u)) {
			continue
		}
		if skip == nil {
			skip = make([]bool, len(plan.Units))
		}
		skip[u.Seq] = true
		n++
	}
	return skip, n
}

// unitStats gives a filter u's column statistics, by column name: a
// partition column's are its one value.
//
// A unit sliced from a row group (MaxUnitRows) carries the group's
// statistics: its null count is of the group's rows, so it is read
// against them (a group of 1000 rows with 950 nulls says nothing of how
// many of a 100-row slice are null).
func unitStats(plan *decode.Plan, u *decode.Unit) func(string) (expr.Range, bool) {
	fields := plan.Fields
	statRows := max(u.Rows, u.GroupRowCount)
	return func(name string) (expr.Range, bool) {
		for k := range plan.Partitions {
			if plan.Partitions[k].Name == name && k < len(u.Partition) {
				return partitionRange(&plan.Partitions[k], u.Partition[k], u.Rows)
			}
		}
		for i := range fields {
			if fields[i].Name != name || i >= len(u.Bounds) {
				continue // a unit from another host's plan carries no bounds
			}
			return boundsRange(u.Bounds[i], statRows)
		}
		return expr.Range{}, false
	}
}

// boundsRange is b, statistics over rows rows, as a filter's pruning
// takes them; false when they say nothing.
func boundsRange(b decode.Bounds, rows int64) (expr.Range, bool) {
	r := expr.Range{NullCount: b.Nulls, Rows: rows, HasBounds: b.Known}
	switch {
	case b.Known && b.Int:
		r.Min, r.Max = float64(b.MinInt), float64(b.MaxInt)
	case b.Known && b.Float:
		r.Min, r.Max = b.MinFloat, b.MaxFloat
	case b.Known:
		r.MinString, r.MaxString = b.MinString, b.MaxString
	}
	return r, b.Known || b.Nulls >= 0
}

// skips reports whether unit seq of this processor's own plan is pruned.
// Units from another host's plan (UnitProcessor.Compute, on a peer) are
// never asked: their Seq indexes that plan, and a requester sends no
// pruned unit.
func (p *processor) skips(seq int) bool { return p.skip != nil && p.skip[seq] }

// emptyBatch makes out a batch of no rows.
func emptyBatch(out *column.Batch) {
	out.Rows = 0
	for i := range out.Columns {
		out.Columns[i].Len = 0
	}
}

// partitionRange is the statistics of a partition column of rows rows,
// every one holding value.
func partitionRange(f *decode.Field, value string, rows int64) (expr.Range, bool) {
	r := expr.Range{Rows: rows, HasBounds: true}
	if f.Kind != column.Fixed {
		r.MinString, r.MaxString = value, value
		return r, true
	}
	v, err := decode.PartitionNumber(f, value)
	if err != nil {
		return expr.Range{}, false
	}
	// float64 bounds: round outward where the value has no exact float,
	// so that the range still holds it.
	r.Min, r.Max = float64(v), float64(v)
	if int64(r.Min) != v {
		r.Min, r.Max = math.Nextafter(r.Min, math.Inf(-1)), math.Nextafter(r.Max, math.Inf(1))
	}
	return r, true
}
