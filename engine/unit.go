package engine

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/cpus"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/ops"
	"github.com/lastmile/lastmile/spec"
)

// processor turns a work unit into the rows it contributes to the stream:
// it decodes the unit and runs the row-local ops, with late
// materialization. It is shared by the workers; each has its own
// unitWorker.
//
// With a pipeline, a unit is decoded in two phases: the Early columns (what
// filters, samples and semi/anti joins read) for every row, then, for the
// rows Select kept only, every other column the pipeline needs. Heavy list
// columns are thus never decoded, padded or copied for rows a filter drops,
// and pages holding no kept row are not even decompressed where the page
// headers give their row counts.
type processor struct {
	plan  *decode.Plan
	prog  *ops.Program // nil: the decoded columns are the output
	early []int        // plan field indexes of Early columns
	late  []int        // plan field indexes of the other Needs columns
	// decoded is late less the partition columns: what the decoder reads
	// (partition.go).
	decoded []int
	cache   *unitCache // nil: none
	// fill says whether units computed now go into the cache: not in
	// the last epoch, which no later epoch reads after (set by produce
	// between epochs, while no worker runs).
	fill    atomic.Bool
	exact   bool // every unit yields exactly its rows (nothing drops rows)
	counted bool // Select alone tells how many rows a unit yields
	workers []*unitWorker
	pruned  int // Iceberg data files the filters excluded, not planned
	// skip marks the units (by Seq) whose row group statistics no row
	// passes the filters with (prune.go): they yield no rows, unread.
	skip    []bool
	skipped int
	fetch   *lateFetch // how the late columns are prefetched (nil: no pipeline)
	// filterCols are the input columns the filters' pruning reads: their
	// page indexes can rule out rows (pagefilter.go); ruledOut counts
	// the rows they did, and progress (when not nil) hears of them too.
	filterCols map[string]bool
	ruledOut   atomic.Int64
	progress   *Progress
	// deleted counts the planned rows that an Iceberg snapshot's
	// position deletes remove (deletes.go).
	deleted int64
}

type unitWorker struct {
	dec   *decode.Decoder
	state *ops.State
	early column.Batch // Early columns, all rows
	in    column.Batch // Needs columns, kept rows
	// deferring is whether dec defers the late columns' prefetch
	// (lateFetch).
	deferring bool
	// cand holds the rows of a unit that its page indexes leave
	// (pagefilter.go) or its deletions do (deletes.go), kept holds the
	// kept rows of the early batch when that batch holds candidates
	// only.
	cand, kept []int32
}

// newProcessor plans the job's input: as it is without a pipeline, and
// otherwise with only the columns the pipeline needs (planPipeline).
func newProcessor(ctx context.Context, job *spec.Job, workers int, fsys decode.FS) (*processor, error) {
	in, err := inputFiles(ctx, job, fsys)
	if err != nil {
		return nil, err
	}
	return inputProcessor(ctx, job, in, workers, fsys)
}

// inputProcessor is newProcessor for the files in lists.
func inputProcessor(ctx context.Context, job *spec.Job, in jobInputs, workers int, fsys decode.FS) (*processor, error) {
	planOpts := in.options(PlanOptions(job, fsys))
	paths, tables := in.paths, in.tables
	if len(job.Pipeline) == 0 {
		plan, err := decode.PlanFiles(ctx, paths, planOpts)
		if err != nil {
			return nil, err
		}
		p := &processor{plan: plan, exact: true, workers: newWorkers(plan, nil, workers)}
		byFile, err := iceberg.Deletions(ctx, fsys, tables, paths)
		if err != nil {
			return nil, err
		}
		if p.deleted, err = iceberg.SetDeletions(plan, byFile, paths); err != nil {
			return nil, err
		}
		p.exact, p.counted = p.deleted == 0, p.deleted > 0
		return p, nil
	}
	plan, prog, pruned, deleted, err := planPipeline(ctx, job, paths, tables, planOpts, workers)
	if err != nil {
		return nil, err
	}
	return pipelineProcessor(job, plan, prog, pruned, deleted, workers)
}

// processorOf is newProcessor for a plan of another host's fields
// (decode.PlanOf): the pipeline is compiled against them, and no file is
// planned or pruned.
func processorOf(ctx context.Context, job *spec.Job, plan *decode.Plan, workers int, fsys decode.FS) (*processor, error) {
	workers = max(workers, 1)
	if len(job.Pipeline) == 0 {
		return &processor{plan: plan, exact: true, workers: newWorkers(plan, nil, workers)}, nil
	}
	env := ops.Env{Seed: job.Seed, Workers: min(workers, cpus.Available()), FS: fsys}
	prog, err := ops.Compile(ctx, job, slices.Concat(plan.Fields, plan.Partitions), env)
	if err != nil {
		return nil, err
	}
	return pipelineProcessor(job, plan, prog, 0, 0, workers)
}

// pipelineProcessor is the processor of job's pipeline prog over plan.
func pipelineProcessor(job *spec.Job, plan *decode.Plan, prog *ops.Program, pruned int, deleted int64, workers int) (*processor, error) {
	p := &processor{plan: plan, prog: prog, exact: !dropsRows(job) && deleted == 0, counted: !prog.ApplyDrops(), pruned: pruned, deleted: deleted}
	p.skip, p.skipped = pruneUnits(plan, prog)
	p.filterCols = filterColumns(prog)
	index := map[string]int{}
	for i, f := range plan.Fields {
		index[f.Name] = i
	}
	for k, f := range plan.Partitions { // filled, not decoded (partition.go)
		index[f.Name] = len(plan.Fields) + k
	}
	isEarly := map[string]bool{}
	for _, name := range prog.Early() {
		i, ok := index[name]
		if !ok {
			return nil, fmt.Errorf("BUG: early column %q not planned", name)
		}
		p.early = append(p.early, i)
		isEarly[name] = true
	}
	for _, name := range prog.Needs() {
		i, ok := index[name]
		if !ok {
			return nil, fmt.Errorf("the plan has no column %q, which the pipeline reads", name)
		}
		if !isEarly[name] {
			p.late = append(p.late, i)
		}
	}
	p.workers = newWorkers(plan, prog, workers)
	var indexed []int // the early columns a filter reads: their page indexes are read (pagefilter.go)
	for _, fi := range p.early {
		if fi < len(plan.Fields) && p.filterCols[plan.Fields[fi].Name] {
			indexed = append(indexed, fi)
		}
	}
	for _, w := range p.workers {
		w.dec.PrefetchPageIndex(indexed)
	}
	p.decoded = p.decodedLate()
	p.fetch = newLateFetch(len(plan.Fields), p.decoded)
	return p, nil
}

// planPipeline compiles job's pipeline against the first input file's
// columns, leaves out the files its filters exclude by their Iceberg
// manifest entries or partition directories (counted in pruned), and
// plans the rest with the columns the pipeline needs: every planned file
// must agree on those. Files left out are never opened. The units get the
// rows the tables' position deletes remove (deleted of them in all).
// inputs are listed once (decode.PlanInputs, as planOpts says) and their
// files planned as listed: by name, not listed or stated again.
func planPipeline(ctx context.Context, job *spec.Job, inputs []string, tables []iceberg.Input, planOpts decode.PlanOptions, workers int) (*decode.Plan, *ops.Program, int, int64, error) {
	fsys := planOpts.FS
	paths, err := decode.PlanInputs(ctx, inputs, planOpts)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	if len(paths) == 0 {
		return nil, nil, 0, 0, fmt.Errorf("plan: no parquet files in %q", inputs)
	}
	planOpts.Listed = true // paths, and a table's files, are files found
	every := planOpts
	every.Columns = nil
	schema, err := schemaPlan(ctx, paths, every)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	env := ops.Env{Seed: job.Seed, Workers: min(workers, cpus.Available()), FS: fsys, InputBuckets: inputBuckets(tables), Unreadable: schema.Unreadable}
	prog, err := ops.Compile(ctx, job, slices.Concat(schema.Fields, schema.Partitions), env)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	pruned := 0
	if hasTables(tables) {
		if paths, pruned, err = iceberg.Files(tables, prog.Prune); err != nil {
			return nil, nil, 0, 0, err
		}
	}
	if paths, err = prunePartitions(paths, planOpts.Partitions, prog.Prune, &pruned); err != nil {
		return nil, nil, 0, 0, err
	}
	planOpts.Columns = prog.Needs()
	plan, err := decode.PlanFiles(ctx, paths, planOpts)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	plan.Unreadable = schema.Unreadable // what the pipeline's "every column" left out
	byFile, err := iceberg.Deletions(ctx, fsys, tables, paths)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	deleted, err := iceberg.SetDeletions(plan, byFile, paths)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	return plan, prog, pruned, deleted, nil
}

func newWorkers(plan *decode.Plan, prog *ops.Program, n int) []*unitWorker {
	ws := make([]*unitWorker, n)
	for i := range ws {
		ws[i] = &unitWorker{dec: plan.NewDecoder()}
		if prog != nil {
			ws[i].state = prog.NewState()
		}
	}
	return ws
}

// dropsRows reports whether any op of the pipeline may drop rows, so that
// a unit's output row count is not known from the plan.
func dropsRows(job *spec.Job) bool {
	for _, op := range job.Pipeline {
		switch op.Kind {
		case "filter", "sample":
			return true
		case "join":
			if op.Join.Kind != "left" {
				return true
			}
		case "nulls":
			if op.Nulls.Policy == "skip" {
				return true
			}
		case "sequence":
			if op.Sequence.OnLong == "skip" {
				return true
			}
		}
	}
	return false
}

// outFields is the schema of the batches the processor produces.
func (p *processor) outFields() []OutField {
	if p.prog == nil {
		return planFields(p.plan)
	}
	var fields []OutField
	for _, f := range p.prog.Output() {
		fields = append(fields, OutField{Name: f.Name, Kind: f.Kind, DType: f.DType, Width: max(f.Width, 1), Nullable: f.Nullable, Group: f.Group})
	}
	return fields
}

// groups is the output's feature groups; the members of groups()[g-1]
// are the outFields with Group g.
func (p *processor) groups() []ops.Group {
	if p.prog == nil {
		return nil
	}
	return p.prog.Groups()
}

func (p *processor) close() {
	for _, w := range p.workers {
		w.dec.Close()
	}
}

// run produces unit u's output rows into out. (The unit cache is read
// and filled around it, by unitRun.work.)
func (p *processor) run(ctx context.Context, worker int, u decode.Unit, out *column.Batch) error {
	if p.skips(u.Seq) {
		emptyBatch(out)
		return nil
	}
	return p.compute(ctx, worker, u, out)
}

func (p *processor) compute(ctx context.Context, worker int, u decode.Unit, out *column.Batch) error {
	w := p.workers[worker]
	if len(u.Partition) != len(p.plan.Partitions) {
		return fmt.Errorf("%s row group %d: %w: the unit has %d partition values, the job %d partition columns",
			u.File, u.RowGroup, decode.ErrBadUnit, len(u.Partition), len(p.plan.Partitions))
	}
	if p.prog == nil {
		if len(u.Deleted) > 0 {
			return p.decodeKept(ctx, w, u, out)
		}
		if err := w.dec.Decode(ctx, u, out); err != nil {
			return err
		}
		return p.fillPartitions(u, out)
	}
	// Bucket joins hold the unit's bucket of their table until it is done.
	w.state.BeginUnit(ctx, u.File)
	defer w.state.EndUnit()
	p.fetch.sync(w, p.decoded)
	sel, early, err := w.selectRows(ctx, p, u)
	if err != nil {
		return err
	}
	rows := int(u.Rows)
	if sel != nil {
		rows = len(sel)
	}
	if rows == 0 {
		emptyBatch(out)
		return nil
	}
	// Every Needs column, for the kept rows: early ones gathered, late
	// ones decoded for those rows only.
	in := &w.in
	n := len(p.early) + len(p.late)
	if cap(in.Columns) < n {
		in.Columns = make([]column.Column, n)
	}
	in.Columns = in.Columns[:n]
	for k := range p.early {
		if early == nil {
			in.Columns[k], w.early.Columns[k] = w.early.Columns[k], in.Columns[k]
		} else {
			var tmp column.Batch
			tmp.Columns = in.Columns[k : k+1]
			tmp.Gather(&column.Batch{Rows: w.early.Rows, Columns: w.early.Columns[k : k+1]}, early)
		}
	}
	if w.deferring {
		if err := w.dec.PrefetchSelected(sel); err != nil {
			return err
		}
	}
	before := w.dec.Stats()
	for j, fi := range p.late {
		if err := p.column(w, &u, fi, sel, rows, &in.Columns[len(p.early)+j]); err != nil {
			return err
		}
	}
	p.fetch.note(w.dec.Stats(), before)
	in.Rows = rows
	if err := w.state.Apply(in, out); err != nil {
		return fmt.Errorf("%s row group %d: %w", u.File, u.RowGroup, err)
	}
	return nil
}

// selectRows decodes the Early columns of u and returns the rows the
// pipeline keeps (nil: all of them), and which rows of w.early those are
// (nil: all of them). The early columns hold every row of u, or only the
// candidates its page indexes leave (pagefilter.go). The decoder is left
// open on u.
func (w *unitWorker) selectRows(ctx context.Context, p *processor, u decode.Unit) (sel, early []int32, err error) {
	if err := w.dec.Open(ctx, u); err != nil {
		return nil, nil, err
	}
	cand, err := w.candidates(p, &u)
	if err != nil {
		return nil, nil, err
	}
	cand = w.withoutDeleted(&u, cand)
	if cand != nil && len(cand) == 0 {
		return cand, nil, nil // every row ruled out: nothing to decode
	}
	rows := int(u.Rows)
	if cand != nil {
		rows = len(cand)
	}
	if cap(w.early.Columns) < len(p.early) {
		w.early.Columns = make([]column.Column, len(p.early))
	}
	w.early.Columns = w.early.Columns[:len(p.early)]
	for k, fi := range p.early {
		if err := p.column(w, &u, fi, cand, rows, &w.early.Columns[k]); err != nil {
			return nil, nil, err
		}
	}
	w.early.Rows = rows
	kept, err := w.state.Select(&w.early, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%s row group %d: %w", u.File, u.RowGroup, err)
	}
	if cand == nil {
		if len(kept) == rows {
			return nil, nil, nil
		}
		return kept, kept, nil
	}
	// Kept rows of the early batch, as rows of the unit.
	w.kept = append(w.kept[:0], kept...)
	sel = make([]int32, len(kept))
	for i, k := range kept {
		sel[i] = cand[k]
	}
	if len(kept) == rows {
		return sel, nil, nil
	}
	return sel, w.kept, nil
}

// count returns how many rows unit u yields, running only the Early
// decode and Select: what resuming mid-epoch needs for the units before
// the resume point.
func (p *processor) count(ctx context.Context, worker int, u decode.Unit) (int64, error) {
	if p.exact {
		return u.Rows, nil
	}
	if p.skips(u.Seq) {
		return 0, nil
	}
	if n := p.cache.rows(u.Seq); n >= 0 {
		return n, nil
	}
	w := p.workers[worker]
	if p.prog == nil { // only deletions drop rows
		return u.Rows - int64(len(u.Deleted)), nil
	}
	if w.state != nil {
		// The unit runs again when it is needed: count its ops' rows then.
		w.state.CountRows(false)
		defer w.state.CountRows(true)
		w.state.BeginUnit(ctx, u.File)
		defer w.state.EndUnit()
	}
	sel, _, err := w.selectRows(ctx, p, u)
	if err != nil {
		return 0, err
	}
	if sel == nil {
		return u.Rows, nil
	}
	return int64(len(sel)), nil
}
