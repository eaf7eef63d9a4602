package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/ops"
	"github.com/lastmile/lastmile/spec"
)

// Check checks job as Run does before it produces anything, without
// producing: it plans the inputs through fsys (nil: decode.OSFS), reading
// every file's footer, and checks the projected columns and the pipeline
// against their schema (ops.Check: side tables are planned, not loaded).
// parseErr is the error spec.ParsePartial returned with job, if any: the
// result holds it and the errors found here together, sorted by line, so
// that all errors of a file are reported at once. An input that cannot be
// planned is returned as it is (it may wrap fs.ErrPermission), or as an
// error of the field inputs next to parse errors.
func Check(ctx context.Context, job *spec.Job, parseErr error, fsys decode.FS) error {
	if job.Invalid("inputs") || job.Invalid("decode.max_unit_rows") {
		return parseErr
	}
	paths, tables, err := admittedFiles(ctx, job, fsys)
	var plan *decode.Plan
	if err == nil {
		plan, err = decode.PlanFiles(ctx, paths, withFieldIDs(schemaOptions(job, fsys), tables))
	}
	if err != nil {
		if parseErr == nil || ctx.Err() != nil {
			return fmt.Errorf("plan job %q: %w", job.Name, err)
		}
		fe := &spec.FieldError{File: job.File(), Line: job.Line("inputs"), Field: "inputs", Msg: err.Error(), Err: err}
		return spec.JoinErrors(parseErr, fe)
	}
	err = ops.Check(ctx, job, slices.Concat(plan.Fields, plan.Partitions), ops.Env{Seed: job.Seed, FS: fsys, InputBuckets: inputBuckets(tables), Unreadable: plan.Unreadable})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if parseErr == nil {
		return err
	}
	return spec.JoinErrors(parseErr, err)
}
