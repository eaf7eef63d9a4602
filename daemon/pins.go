package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/spec"
)

// pin is an Iceberg input or side table of a job, pinned to the snapshot
// it read when the job was accepted. The record keeps the pins beside the
// spec text, so that after a restart the job resumes on the same
// snapshot, and every later epoch reads it, whatever has been committed
// to the table meanwhile (the spec text itself may name "the current
// snapshot").
type pin struct {
	// Field is where the table is in the spec: "inputs[2]" or
	// "pipeline[3].join.table".
	Field string `json:"field"`
	// Input is the pinned text ("iceberg:...?snapshot=ID").
	Input    string `json:"input"`
	Snapshot int64  `json:"snapshot"`
}

// pinJob pins the Iceberg tables of job (engine.PinInputs), reading their
// metadata through fsys, and returns the pinned job with its pins.
func pinJob(ctx context.Context, job *spec.Job, fsys decode.FS) (*spec.Job, []pin, error) {
	pinned, err := engine.PinInputs(ctx, job, fsys)
	if err != nil || pinned == job {
		return job, nil, err
	}
	var pins []pin
	add := func(field, before, after string) error {
		if before == after {
			return nil
		}
		r, err := iceberg.ParseRef(after)
		if err != nil {
			return fmt.Errorf("BUG: pinned %s: %w", field, err)
		}
		pins = append(pins, pin{Field: field, Input: after, Snapshot: r.Snapshot})
		return nil
	}
	for i := range job.Inputs {
		if err := add(fmt.Sprintf("inputs[%d]", i), job.Inputs[i], pinned.Inputs[i]); err != nil {
			return nil, nil, err
		}
	}
	for i, op := range job.Pipeline {
		if op.Kind == "join" {
			if err := add(op.Path+".join.table", op.Join.Table, pinned.Pipeline[i].Join.Table); err != nil {
				return nil, nil, err
			}
		}
	}
	return pinned, pins, nil
}

// applyPins puts a record's pins back into the job parsed from its spec
// text. A pin that names no Iceberg table of the spec, or another table
// than the one there, means the record was not written for this spec.
func applyPins(job *spec.Job, pins []pin) error {
	for _, p := range pins {
		r, err := iceberg.ParseRef(p.Input)
		if err != nil || r.Snapshot == 0 {
			return fmt.Errorf("record pin %s: %q is not a pinned Iceberg table", p.Field, p.Input)
		}
		slot := pinSlot(job, p.Field)
		if slot == nil {
			return fmt.Errorf("record pin %s: the spec has no Iceberg table there", p.Field)
		}
		base, err := iceberg.ParseRef(*slot)
		if err != nil {
			return fmt.Errorf("record pin %s: %w", p.Field, err)
		}
		base.Snapshot = r.Snapshot
		if base.String() != r.String() {
			return fmt.Errorf("record pin %s: %q is not the spec's table %q", p.Field, p.Input, *slot)
		}
		*slot = p.Input
	}
	return nil
}

// pinSlot returns the spec string at field, if it is an Iceberg table.
func pinSlot(job *spec.Job, field string) *string {
	for i := range job.Inputs {
		if field == fmt.Sprintf("inputs[%d]", i) && iceberg.IsRef(job.Inputs[i]) {
			return &job.Inputs[i]
		}
	}
	for i := range job.Pipeline {
		op := &job.Pipeline[i]
		if op.Kind == "join" && field == op.Path+".join.table" && iceberg.IsRef(op.Join.Table) {
			return &op.Join.Table
		}
	}
	return nil
}

// absoluteInput reports whether an input names no path relative to the
// spec: an absolute path, a URL (s3://), or an Iceberg table at one.
func absoluteInput(in string) bool {
	if rest, ok := strings.CutPrefix(in, iceberg.Scheme); ok {
		in = strings.TrimPrefix(rest, "file:")
	}
	return filepath.IsAbs(in) || strings.Contains(in, "://")
}
