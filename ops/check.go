package ops

import (
	"context"
	"errors"
	"sort"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/expr"
	"github.com/lastmile/lastmile/spec"
)

// Compile reports every independent error of a pipeline at once. An op
// with an error (or one the spec parser reported: spec.Job.Invalid) is
// skipped, and the columns it would have made or changed become unsure:
// a later op that looks one of them up is skipped too, silently, since its
// error would only repeat the first. Ops that do not depend on a bad one
// are checked as usual.

// compile checks every op of job.Pipeline against input and returns the
// compiler holding the program's parts, or every error found: one is a
// *spec.FieldError, several are spec.Errors sorted by line. Side tables
// are planned (their footers read), not loaded.
func compile(ctx context.Context, job *spec.Job, input []decode.Field, env Env) (*compiler, error) {
	if env.Seed == 0 {
		env.Seed = job.Seed
	}
	c := &compiler{job: job, env: env, input: input, gone: map[string]string{}, unsure: map[string]bool{}}
	c.start()
	for i := range job.Pipeline {
		op := &job.Pipeline[i]
		if job.Invalid(op.Path) {
			c.doubt(op)
			continue
		}
		c.cascade = false
		err := c.op(ctx, op)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var es spec.Errors
		var fe *spec.FieldError
		switch {
		case errors.Is(err, errCascade):
		case errors.As(err, &es):
		case errors.As(err, &fe):
			es = spec.Errors{fe}
		default:
			return nil, err
		}
		c.doubt(op)
		if !c.cascade {
			c.errs = append(c.errs, es...)
		}
	}
	if len(c.errs) == 0 && len(c.schema) == 0 && len(job.Pipeline) > 0 {
		c.errs = append(c.errs, c.emptied(job))
	}
	switch len(c.errs) {
	case 0:
		return c, nil
	case 1:
		return nil, c.errs[0]
	}
	sort.SliceStable(c.errs, func(i, k int) bool { return c.errs[i].Line < c.errs[k].Line })
	return nil, c.errs
}

// emptied is the error of a pipeline that leaves no column, named at the
// last drop (the one op that removes columns without listing those kept).
func (c *compiler) emptied(job *spec.Job) *spec.FieldError {
	const why = "leaves no column: trainers would get batches without a tensor; keep at least one column"
	for i := len(job.Pipeline) - 1; i >= 0; i-- {
		if op := &job.Pipeline[i]; op.Kind == "drop" {
			return c.errf(op, "", "%s", why)
		}
	}
	return c.errf(&job.Pipeline[len(job.Pipeline)-1], "", "the pipeline %s", why)
}

// Check checks job's pipeline against input as Compile does, reporting
// every error at once, without loading side tables: their footers are
// read through env.FS, their columns checked and their size estimated
// against max_memory. It is what a daemon runs before it accepts a job.
func Check(ctx context.Context, job *spec.Job, input []decode.Field, env Env) error {
	c, err := compile(ctx, job, input, env)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range c.joins {
		if t.buckets != nil {
			if err := t.buckets.check(job); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		limit := int64(t.jn.MaxMemory)
		if limit <= 0 {
			limit = 1 << 30
		}
		if est := t.estimate(); est > limit {
			errs = append(errs, t.tooBig(job, est))
		}
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return spec.JoinErrors(errs...)
}

// errCascade is the error of an op whose every error only follows from
// earlier ones (entryErrs): it is skipped, and reports nothing.
var errCascade = errors.New("an earlier error")

// entryErrs collects the errors of the entries of a map, cast, drop or
// nulls op, each checked on its own: the error of an entry that looked up
// an unsure column (c.cascade) is left out. It returns what the op returns: nil,
// the errors, or errCascade when there were only such errors.
type entryErrs struct {
	c       *compiler
	errs    spec.Errors
	skipped bool
}

func (ee *entryErrs) add(err error) {
	if ee.c.cascade {
		ee.c.cascade, ee.skipped = false, true
		return
	}
	fe, ok := err.(*spec.FieldError)
	if !ok {
		fe = &spec.FieldError{File: ee.c.job.File(), Msg: err.Error()}
	}
	ee.errs = append(ee.errs, fe)
}

func (ee *entryErrs) err() error {
	switch {
	case len(ee.errs) > 0:
		return ee.errs
	case ee.skipped:
		return errCascade
	}
	return nil
}

// doubt marks the columns op makes, replaces or removes as unsure: op had
// an error, so what the schema holds under those names is unknown.
func (c *compiler) doubt(op *spec.Op) {
	var names []string
	switch op.Kind {
	case "sample":
		if op.Sample != nil {
			names = append(names, op.Sample.Weight)
		}
	case "join":
		if op.Join != nil {
			names = append(names, op.Join.Columns...)
		}
	case "map", "cast", "rename":
		for _, a := range append(append(op.Map, op.Cast...), op.Rename...) {
			names = append(names, a.Name, a.Value)
		}
	case "sequence":
		if s := op.Sequence; s != nil {
			names = append(names, s.Column, s.Output, s.Lengths)
		}
	case "stack":
		if s := op.Stack; s != nil {
			names = append(append(names, s.Output), s.Columns...)
		}
	case "jagged":
		if j := op.Jagged; j != nil {
			names = append(names, j.Output)
			for _, k := range j.Keys {
				names = append(names, k.Column)
			}
		}
	case "select", "drop":
		names = append(append(names, op.Select...), op.Drop...)
	}
	for _, n := range names {
		if n != "" {
			c.unsure[n] = true
		}
	}
}

// Pruner checks job's pipeline against input as Check does, without
// loading side tables, and returns what Program.Prune would answer: which
// column statistics the pipeline's filters may keep a row of. A daemon
// uses it to leave out, before it opens them, the files a job's filters
// exclude by their partition values.
func Pruner(ctx context.Context, job *spec.Job, input []decode.Field, env Env) (func(stats func(col string) (expr.Range, bool)) bool, error) {
	c, err := compile(ctx, job, input, env)
	if err != nil {
		return nil, err
	}
	return c.program(job).Prune, nil
}
