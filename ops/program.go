package ops

import (
	"context"
	"fmt"
	"slices"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/expr"
	"github.com/lastmile/lastmile/spec"
)

// Env is what a pipeline needs from the job around it.
type Env struct {
	// Seed is the job's seed; sample ops without a seed of their own use
	// it. 0 means the job spec's seed.
	Seed uint64
	// Workers bounds the goroutines Compile uses to load side tables;
	// 0 means one.
	Workers int
	// FS is where side tables are read from; nil is decode.OSFS. The
	// daemon passes one that reads with the job owner's credentials.
	FS decode.FS
	// InputBuckets, when the input files are bucketed (Iceberg bucket
	// partitions), says how: a join on the bucket column with a table
	// bucketed alike runs as a bucket join (bucketjoin.go).
	InputBuckets *Buckets
	// Unreadable are the input's columns that the decoder cannot read
	// (decode.Plan.Unreadable): naming one is an error that says why.
	Unreadable []decode.Unreadable
}

// OutField describes one column of the batches Apply produces.
type OutField struct {
	Name     string
	Kind     column.Kind
	DType    column.DType
	Width    int // Fixed: elements per row; a [B, Width] tensor when > 1
	Nullable bool
	// Group is 0 for a column of its own, g for a member of the feature
	// group Groups()[g-1] (see groups.go).
	Group int
}

// Program is a pipeline compiled against an input schema. It is read-only
// once made and may be shared by any number of goroutines; each worker
// runs it through its own State.
type Program struct {
	job     *spec.Job
	vals    []value
	steps   []step
	outputs []entry
	out     []OutField
	groups  []Group
	needs   []string
	early   []string

	selectSteps []int // steps Select runs, in spec order
	applySteps  []int // compute steps Apply runs, in spec order
	preDrops    []int // drops Apply runs first: they read input columns only
	lateDrops   []int // drops Apply runs after the computing steps
	checks      []int // checks Apply runs on the rows it keeps
	selectIn    []int // input values Select reads
	applyIn     []int // input values Apply reads or outputs
	home        []int // by value: first output position, -1 if none
	filters     []*filterStep
	tables      []*sideTable
	rows        []opRows // by step: the row-dropping ones' counts (oprows.go)
}

// Compile validates every op of job.Pipeline against input, the input
// file schema (every column, or at least the job's columns when it lists
// them), and returns the program that runs them. Side tables
// of joins are loaded here, once, after every op has been checked. Errors
// in the spec name the op's field and line, every independent one at once
// (check.go): one is a *spec.FieldError, several are spec.Errors.
func Compile(ctx context.Context, job *spec.Job, input []decode.Field, env Env) (*Program, error) {
	c, err := compile(ctx, job, input, env)
	if err != nil {
		return nil, err
	}
	for _, t := range c.joins {
		if t.buckets != nil {
			if err := t.buckets.check(job); err != nil {
				return nil, err
			}
			continue // loaded by bucket, as units need them
		}
		if err := t.load(ctx, job, c.env); err != nil {
			return nil, err
		}
	}
	return c.program(job), nil
}

// program builds and plans the Program of the checked pipeline; its side
// tables are loaded or not, as the caller left them.
func (c *compiler) program(job *spec.Job) *Program {
	outputs, groups := expandGroups(c.schema, c.vals)
	p := &Program{job: job, vals: c.vals, steps: c.steps, outputs: outputs, groups: groups, tables: c.joins,
		rows: make([]opRows, len(c.steps))}
	p.plan()
	return p
}

func (c *compiler) op(ctx context.Context, op *spec.Op) error {
	switch op.Kind {
	case "filter":
		return c.filter(op)
	case "sample":
		return c.sample(op)
	case "join":
		return c.join(ctx, op)
	case "map":
		return c.mapOp(op)
	case "sequence":
		return c.sequence(op)
	case "cast":
		return c.cast(op)
	case "nulls":
		return c.nulls(op)
	case "stack":
		return c.stack(op)
	case "jagged":
		return c.jagged(op)
	case "select":
		return c.selectOp(op)
	case "rename":
		return c.rename(op)
	case "drop":
		return c.drop(op)
	}
	return c.errf(op, "", "unknown op %q", op.Kind)
}

// plan decides where every step runs (see doc.go, "Select and Apply"),
// drops steps whose results nobody reads and works out the input columns.
func (p *Program) plan() {
	stepLive := p.liveSteps()
	stepEarly := p.earlySteps()
	p.placeSteps(stepEarly, stepLive)

	// Inputs.
	selIn, appIn := p.stepInputs()
	p.planOutputs(appIn)
	p.moves()
	p.listInputs(selIn, appIn)
}

// liveSteps reports, by step, whether anything needs it: drops and checks
// always run, other steps only when an output or a needed step reads what
// they write.
func (p *Program) liveSteps() []bool {
	live := make([]bool, len(p.vals))
	stepLive := make([]bool, len(p.steps))
	for _, e := range p.outputs {
		live[e.vid] = true
	}
	for i := len(p.steps) - 1; i >= 0; i-- {
		b := p.steps[i].base()
		need := false
		switch p.steps[i].(type) {
		case dropper, checker:
			need = true
		default:
			for _, w := range b.writes {
				need = need || live[w]
			}
		}
		if need {
			stepLive[i] = true
			for _, r := range b.reads {
				live[r] = true
			}
		}
	}
	return stepLive
}

// earlySteps reports, by step, whether it runs in Select: the row-dropping
// steps that must or may run there, and the steps that compute what they
// read.
func (p *Program) earlySteps() []bool {
	n := len(p.vals)
	// Values the row-dropping steps of Select read, and the steps that
	// compute them.
	early := make([]bool, n)
	stepEarly := make([]bool, len(p.steps))
	var mark func(vid int)
	mark = func(vid int) {
		if early[vid] {
			return
		}
		early[vid] = true
		if s := p.vals[vid].producer; s >= 0 && !stepEarly[s] {
			stepEarly[s] = true
			for _, r := range p.steps[s].base().reads {
				mark(r)
			}
		}
	}
	for i, s := range p.steps {
		if d, ok := s.(dropper); ok && !d.optional() {
			stepEarly[i] = true
			for _, r := range s.base().reads {
				mark(r)
			}
		}
	}
	earlyIn := make([]bool, n)
	for v := range p.vals {
		earlyIn[v] = early[v] && p.vals[v].producer < 0
	}
	// An optional drop (nulls: skip, on_long: skip) runs in Select when
	// the columns it reads derive only from columns Select decodes anyway.
	for i, s := range p.steps {
		if d, ok := s.(dropper); ok && d.optional() {
			ok := true
			for _, r := range s.base().reads {
				ok = ok && p.inputsWithin(r, earlyIn)
			}
			if ok {
				stepEarly[i] = true
				for _, r := range s.base().reads {
					mark(r)
				}
			}
		}
	}
	return stepEarly
}

// placeSteps files every step, in spec order, under the phase that runs
// it: Select, Apply's first or late drops, its checks or its computing
// steps; a computing step may run in both. It also collects the filters.
func (p *Program) placeSteps(stepEarly, stepLive []bool) {
	for i, s := range p.steps {
		switch s.(type) {
		case dropper:
			switch {
			case stepEarly[i]:
				p.selectSteps = append(p.selectSteps, i)
			case p.readsInputs(i):
				p.preDrops = append(p.preDrops, i)
			default:
				p.lateDrops = append(p.lateDrops, i)
			}
		case checker:
			p.checks = append(p.checks, i)
		default:
			if stepEarly[i] {
				p.selectSteps = append(p.selectSteps, i)
			}
			if stepLive[i] {
				p.applySteps = append(p.applySteps, i)
			}
		}
		if f, ok := s.(*filterStep); ok {
			p.filters = append(p.filters, f)
		}
	}
}

// stepInputs reports, by value, whether a step of Select reads it and
// whether a step of Apply does.
func (p *Program) stepInputs() (selIn, appIn []bool) {
	n := len(p.vals)
	selIn = make([]bool, n)
	appIn = make([]bool, n)
	for _, i := range p.selectSteps {
		for _, r := range p.steps[i].base().reads {
			selIn[r] = true
		}
	}
	for _, list := range [][]int{p.applySteps, p.preDrops, p.lateDrops, p.checks} {
		for _, i := range list {
			for _, r := range p.steps[i].base().reads {
				appIn[r] = true
			}
		}
	}
	return selIn, appIn
}

// planOutputs works out the output schema and every value's first output
// position, and marks the output values in appIn: Apply outputs them.
func (p *Program) planOutputs(appIn []bool) {
	p.home = make([]int, len(p.vals))
	for v := range p.home {
		p.home[v] = -1
	}
	for pos, e := range p.outputs {
		appIn[e.vid] = true
		if p.home[e.vid] < 0 {
			p.home[e.vid] = pos
		}
		v := &p.vals[e.vid]
		p.out = append(p.out, OutField{Name: e.name, Kind: v.kind, DType: v.dtype, Width: v.width, Nullable: e.nullable, Group: e.group})
	}
}

// listInputs lists the input values Select and Apply read, and the input
// columns to decode early and at all, in input value order.
func (p *Program) listInputs(selIn, appIn []bool) {
	for v := range p.vals {
		if p.vals[v].producer >= 0 {
			continue
		}
		name := p.vals[v].input
		if selIn[v] {
			p.selectIn = append(p.selectIn, v)
			p.early = append(p.early, name)
		}
		if appIn[v] {
			p.applyIn = append(p.applyIn, v)
		}
		if selIn[v] || appIn[v] {
			p.needs = append(p.needs, name)
		}
	}
}

// readsInputs reports whether step i reads input columns only.
func (p *Program) readsInputs(i int) bool {
	for _, r := range p.steps[i].base().reads {
		if p.vals[r].producer >= 0 {
			return false
		}
	}
	return true
}

// moves lets a ragged sequence take over its input column instead of
// copying it, where Apply reads that column nowhere after it and does not
// output it: the column is the decoded batch's, which Apply consumes.
func (p *Program) moves() {
	for _, i := range p.applySteps {
		sh, ok := p.steps[i].(*seqShape)
		if !ok || sh.length > 0 || sh.out < 0 || p.vals[sh.src].producer >= 0 || p.home[sh.src] >= 0 {
			continue
		}
		reads := func(j int) bool { return slices.Contains(p.steps[j].base().reads, sh.src) }
		move := true
		for _, j := range p.applySteps {
			move = move && !(j > i && reads(j)) // computed after it
		}
		for _, j := range slices.Concat(p.lateDrops, p.checks) {
			move = move && !reads(j) // run after every computing step
		}
		sh.move = move
	}
}

// reorderable reports whether Select may run its drops in any order: when
// there are several and no computing step between them (whose place in
// the order would matter), and none of them checks the rows it is given
// (a bucket join verifying its declared layout), whose failing would
// then depend on which drops ran before it, a worker's timings.
func (p *Program) reorderable() bool {
	for _, i := range p.selectSteps {
		if _, ok := p.steps[i].(dropper); !ok {
			return false
		}
		if j, ok := p.steps[i].(*joinDrop); ok && j.use.b != nil && j.use.b.verify {
			return false
		}
	}
	return len(p.selectSteps) > 1
}

// inputsWithin reports whether every input value vid derives from is in
// set.
func (p *Program) inputsWithin(vid int, set []bool) bool {
	s := p.vals[vid].producer
	if s < 0 {
		return set[vid]
	}
	for _, r := range p.steps[s].base().reads {
		if !p.inputsWithin(r, set) {
			return false
		}
	}
	return true
}

// Needs returns the input columns to decode at all, in the order the
// pipeline first sees them (the job's columns order, else the input's):
// projection pushdown, so no other column is read.
func (p *Program) Needs() []string { return p.needs }

// Early returns the input columns Select reads: those that decide which
// rows survive. Decode them first, for all the unit's rows; they are a
// subset of Needs.
func (p *Program) Early() []string { return p.early }

// ApplyDrops reports whether Apply may drop rows that Select kept (nulls:
// skip or on_long: skip over columns decoded late). When it does not, the
// length of Select's result is the number of rows a unit yields.
func (p *Program) ApplyDrops() bool { return len(p.preDrops)+len(p.lateDrops) > 0 }

// Output returns the schema of the batches Apply produces: one column per
// output column, and the members of every feature group in its place.
func (p *Program) Output() []OutField { return p.out }

// Groups returns the feature groups of the output, in output order; the
// members of Groups()[g] are the Output columns with Group g+1.
func (p *Program) Groups() []Group { return p.groups }

// Prune reports whether a row group whose input columns have the given
// statistics may hold a row that survives the pipeline's filters; false
// means it can be skipped without decoding it. Only filters over input
// columns as decoded take part.
func (p *Program) Prune(stats func(col string) (expr.Range, bool)) bool {
	for _, f := range p.filters {
		if !f.mayMatch(p, stats) {
			return false
		}
	}
	return true
}

// NewState returns the scratch one worker runs the program with.
func (p *Program) NewState() *State {
	st := &State{p: p, steps: make([]step, len(p.steps))}
	for i, s := range p.steps {
		st.steps[i] = s.clone()
	}
	st.f.vals = make([]*column.Column, len(p.vals))
	st.f.own = make([]column.Column, len(p.vals))
	st.gath = make([]column.Column, len(p.vals))
	if p.reorderable() {
		st.order = slices.Clone(p.selectSteps)
		st.stats = make([]dropStats, len(p.steps))
	}
	return st
}

// String renders the plan, for logs and tests: which op runs where.
func (p *Program) String() string {
	s := fmt.Sprintf("needs %v, early %v\n", p.needs, p.early)
	name := func(i int) string {
		b := p.steps[i].base()
		return fmt.Sprintf("%s.%s(%s)", b.op.Path, b.op.Kind, b.what)
	}
	for _, i := range p.selectSteps {
		s += "select: " + name(i) + "\n"
	}
	for _, i := range p.preDrops {
		s += "apply drop first: " + name(i) + "\n"
	}
	for _, i := range p.applySteps {
		s += "apply: " + name(i) + "\n"
	}
	for _, i := range p.lateDrops {
		s += "apply drop: " + name(i) + "\n"
	}
	for _, i := range p.checks {
		s += "apply check: " + name(i) + "\n"
	}
	return s
}
