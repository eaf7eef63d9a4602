package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/iceberg"
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
// planned is an error of the field inputs (the input it names, where it
// names one), which still wraps what planning returned (fs.ErrPermission).
func Check(ctx context.Context, job *spec.Job, parseErr error, fsys decode.FS) error {
	if job.Invalid("inputs") || job.Invalid("decode.max_unit_rows") {
		return parseErr
	}
	in, err := admittedFiles(ctx, job, fsys)
	var plan *decode.Plan
	if err == nil {
		plan, err = decode.PlanFiles(ctx, in.paths, in.options(schemaOptions(job, fsys)))
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("plan job %q: %w", job.Name, err)
		}
		fe := inputError(job, err)
		if parseErr == nil {
			return fe
		}
		return spec.JoinErrors(parseErr, fe)
	}
	err = ops.Check(ctx, job, slices.Concat(plan.Fields, plan.Partitions), ops.Env{Seed: job.Seed, FS: fsys, InputBuckets: inputBuckets(in.tables), Unreadable: plan.Unreadable})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if parseErr == nil {
		return err
	}
	return spec.JoinErrors(parseErr, err)
}

// inputError is planning's err as an error of job's inputs: of the input
// whose path it names, else of the field inputs.
func inputError(job *spec.Job, err error) *spec.FieldError {
	field, line := "inputs", job.Line("inputs")
	msg := strings.TrimPrefix(err.Error(), "plan: ")
	// The longest input the message names: of day=1 and day=10, the error
	// of day=10 names both.
	best := -1
	for i, in := range job.Inputs {
		if in != "" && strings.Contains(msg, in) && (best < 0 || len(in) > len(job.Inputs[best])) {
			best = i
		}
	}
	if best >= 0 {
		field = fmt.Sprintf("inputs[%d]", best)
		if l := job.Line(field); l > 0 {
			line = l
		}
	}
	for name := range job.Hashed {
		// A hashed column the input lacks (with every column read, parsing
		// could not tell): the error of that key.
		if p := "hashed." + name; strings.Contains(msg, fmt.Sprintf("column %q (hashed)", name)) && job.Line(p) > 0 {
			field, line = p, job.Line(p)
		}
	}
	if errors.Is(err, fs.ErrNotExist) && best >= 0 && relative(job.Inputs[best]) {
		msg += " (a relative input is relative to the spec's directory)"
	}
	return &spec.FieldError{File: job.File(), Line: line, Field: field, Msg: msg, Err: err}
}

// relative reports whether input is a relative path: not absolute, not a
// URL. An Iceberg table is relative when its metadata file's location is
// (a catalog's table is not).
func relative(input string) bool {
	if iceberg.IsRef(input) {
		r, err := iceberg.ParseRef(input)
		if err != nil || r.Metadata == "" {
			return false
		}
		input, _ = strings.CutPrefix(r.Metadata, "file:")
	}
	return !strings.HasPrefix(input, "/") && !strings.Contains(input, "://")
}
