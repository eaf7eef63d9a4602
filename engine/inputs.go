package engine

import (
	"context"
	"slices"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/ops"
	"github.com/lastmile/lastmile/spec"
)

// PinInputs returns job with every Iceberg input and side table pinned to
// a snapshot: the one it names, or the table's current snapshot now
// ("iceberg:...?snapshot=ID"). job itself is not changed; a job without
// Iceberg tables is returned as it is. Run pins the job it is given, so
// that all its epochs read one snapshot; the daemon pins a job when it
// accepts it and records the pinned inputs, so that a resume after a
// restart reads that snapshot too, whatever was committed to the table
// meanwhile.
func PinInputs(ctx context.Context, job *spec.Job, fsys decode.FS) (*spec.Job, error) {
	o := iceberg.Opener{FS: fsys}
	var c *spec.Job
	clone := func() {
		if c == nil {
			cp := *job
			cp.Inputs = slices.Clone(job.Inputs)
			cp.Pipeline = slices.Clone(job.Pipeline)
			c = &cp
		}
	}
	for i, in := range job.Inputs {
		if !iceberg.IsRef(in) {
			continue
		}
		pinned, _, err := o.Pin(ctx, in)
		if err != nil {
			return nil, err
		}
		if pinned != in {
			clone()
			c.Inputs[i] = pinned
		}
	}
	for i, op := range job.Pipeline {
		if op.Kind != "join" || !iceberg.IsRef(op.Join.Table) {
			continue
		}
		pinned, _, err := o.Pin(ctx, op.Join.Table)
		if err != nil {
			return nil, err
		}
		if pinned != op.Join.Table {
			clone()
			jn := *op.Join
			jn.Table = pinned
			c.Pipeline[i].Join = &jn
		}
	}
	if c == nil {
		return job, nil
	}
	return c, nil
}

// inputFiles lists what the planner reads for job (nil fsys:
// decode.OSFS): its plain inputs as they are (files, globs, directories,
// object prefixes), the data files of its Iceberg tables' snapshots, and
// the tables' scans.
func inputFiles(ctx context.Context, job *spec.Job, fsys decode.FS) ([]string, []iceberg.Input, error) {
	ins, err := iceberg.Opener{FS: fsys}.Expand(ctx, job.Inputs)
	if err != nil {
		return nil, nil, err
	}
	paths, _, err := iceberg.Files(ins, nil)
	return paths, ins, err
}

func hasTables(ins []iceberg.Input) bool {
	for _, in := range ins {
		if in.Scan != nil {
			return true
		}
	}
	return false
}

// inputBuckets says how the input is bucketed: when every input is an
// Iceberg table bucketed as bucket[N](column), all alike; else nil.
func inputBuckets(ins []iceberg.Input) *ops.Buckets {
	var b *ops.Buckets
	for _, in := range ins {
		if in.Scan == nil || in.Scan.Buckets == nil {
			return nil
		}
		bk := in.Scan.Buckets
		if b == nil {
			b = &ops.Buckets{Column: bk.Column, N: bk.N, Of: map[string]int{}}
		} else if b.Column != bk.Column || b.N != bk.N {
			return nil
		}
		for _, f := range in.Scan.Files {
			b.Of[f.Path] = f.Bucket
		}
	}
	return b
}

// withFieldIDs returns opts reading the data files of tables by their
// tables' field ids (decode.PlanOptions.Table): a column renamed since
// a file was written is found under its old name there. Plain inputs are
// read by name.
func withFieldIDs(opts decode.PlanOptions, tables []iceberg.Input) decode.PlanOptions {
	byPath := map[string]*decode.TableSchema{}
	for _, in := range tables {
		if in.Scan == nil {
			continue
		}
		for i := range in.Scan.Files {
			f := &in.Scan.Files[i]
			byPath[f.Path] = in.Scan.SchemaOf(f)
		}
	}
	if len(byPath) > 0 {
		opts.Table = func(path string) *decode.TableSchema { return byPath[path] }
	}
	return opts
}

// InputPlan is what the planner reads for job (nil fsys: decode.OSFS)
// and how: its plain inputs as they are (files, globs, directories,
// object prefixes), the data files of its Iceberg tables' snapshots, and
// PlanOptions with the tables' field ids. Code that plans a job's input
// itself passes these to decode.PlanFiles.
func InputPlan(ctx context.Context, job *spec.Job, fsys decode.FS) ([]string, decode.PlanOptions, error) {
	paths, tables, err := inputFiles(ctx, job, fsys)
	if err != nil {
		return nil, decode.PlanOptions{}, err
	}
	return paths, withFieldIDs(PlanOptions(job, fsys), tables), nil
}
