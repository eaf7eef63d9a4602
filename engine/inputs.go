package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

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
	if err := sharedDataFiles(ctx, fsys, ins); err != nil {
		return nil, nil, err
	}
	paths, _, err := iceberg.Files(ins, nil)
	return paths, ins, err
}

// sharedDataFiles refuses a job in which an Iceberg table's data file is
// also named by another input: a plain one (a file, glob, directory or
// prefix reaching it) or another table or snapshot. A file is planned
// once however many inputs name it, but the inputs disagree on what it
// holds: a table reads it without the rows its snapshot deletes, by its
// field ids and with its partition values, a plain input reads it whole
// and by name. Whichever view won, the other input's rows would be
// silently wrong. The same table at the same snapshot named twice agrees
// with itself and is read once. Plain inputs are listed here only when
// the job has a table and another input.
func sharedDataFiles(ctx context.Context, fsys decode.FS, ins []iceberg.Input) error {
	if !hasTables(ins) || len(ins) < 2 {
		return nil
	}
	type owner struct {
		name string
		snap int64
	}
	byFile := map[string]owner{}
	for _, in := range ins {
		if in.Scan == nil {
			continue
		}
		me := owner{in.Scan.Table, in.Scan.SnapshotID}
		for _, f := range in.Scan.Files {
			key := fileKey(f.Path)
			if o, ok := byFile[key]; ok && (o.snap != me.snap || tableKey(o.name) != tableKey(me.name)) {
				return fmt.Errorf("plan: the data file %s belongs to Iceberg table %s at snapshot %d and to %s at snapshot %d; each reads it with its own deleted rows and schema, and a file is read once: name one of them", f.Path, o.name, o.snap, me.name, me.snap)
			}
			byFile[key] = me
		}
	}
	for _, in := range ins {
		if in.Scan != nil {
			continue
		}
		files, err := decode.ExpandInputs(ctx, fsys, []string{in.Plain})
		if err != nil {
			return err
		}
		for _, p := range files {
			if o, ok := byFile[fileKey(p)]; ok {
				what := "reaches " + p + ", which is"
				if p == in.Plain {
					what = "is"
				}
				return fmt.Errorf("plan: the input %q %s a data file of Iceberg table %s (snapshot %d); a file is read once, and the table reads it without the rows it deletes while a plain input reads it whole: read it through the table only, or leave it out of %q", in.Plain, what, o.name, o.snap, in.Plain)
			}
		}
	}
	return nil
}

// fileKey is the name sharedDataFiles compares a file by: a local path
// cleaned, since "dir//f", "dir/./f" and "dir/f" are one file (which the
// planner, going by the name, would read twice: once with the table's
// deletes, once whole); an object URL as it is, since its key is a name
// ("a//b" is another object than "a/b"). Symlinks are not resolved.
func fileKey(p string) string {
	if strings.Contains(p, "://") {
		return p
	}
	return filepath.Clean(p)
}

// tableKey is a table input's name (Scan.Table, without its snapshot)
// with its metadata file spelled as fileKey compares it, so that one
// table named twice ("iceberg:/t/metadata/v2.metadata.json" and
// "iceberg:file:///t/metadata/v2.metadata.json") agrees with itself.
func tableKey(name string) string {
	r, err := iceberg.ParseRef(name)
	if err != nil || r.Metadata == "" {
		return name
	}
	loc := r.Metadata
	if rest, ok := strings.CutPrefix(loc, "file://"); ok {
		loc = rest
	} else if rest, ok := strings.CutPrefix(loc, "file:"); ok {
		loc = rest
	}
	for _, s := range []string{"s3a://", "s3n://"} {
		if rest, ok := strings.CutPrefix(loc, s); ok {
			loc = "s3://" + rest
		}
	}
	r.Metadata = fileKey(loc)
	return r.String()
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
