package main

import (
	"context"
	"fmt"
	"os"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

// readJob reads the spec at path and checks it against its input as
// lastmiled checks a submitted one (engine.Check): the errors of the
// text and those of its columns and pipeline against the input's schema
// come together, every one of the file at once, sorted by line.
func readJob(ctx context.Context, path string) (*spec.Job, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read job spec: %w", err)
	}
	job, perr := spec.ParsePartial(spec.Source{File: path}, data)
	if job == nil {
		return nil, perr
	}
	fsys, err := inputFS()
	if err != nil {
		return nil, err
	}
	if err := engine.Check(ctx, job, perr, fsys); err != nil {
		return nil, err
	}
	return job, nil
}

// specFile is how a submitted spec's file is named in the daemon's
// errors: as the user gave it, "<stdin>" for -.
func specFile(path string) string {
	if path == "-" {
		return "<stdin>"
	}
	return path
}
