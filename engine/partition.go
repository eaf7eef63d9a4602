package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/expr"
	"github.com/lastmile/lastmile/ops"
	"github.com/lastmile/lastmile/spec"
)

// Partition columns (spec.Partitions) are planned after the file
// columns: a processor's field index fi names plan.Fields[fi] below
// len(plan.Fields), and plan.Partitions[fi-len(plan.Fields)] from there.
// Their rows are filled from the unit's values, never decoded, so the
// decoder and the late columns' prefetch see only the file columns.

// PlanOptions is how job's input is planned through fsys: its columns
// (every column the decoder can read, when it names none), row group
// slices, partition columns and hashed strings.
func PlanOptions(job *spec.Job, fsys decode.FS) decode.PlanOptions {
	return decode.PlanOptions{Columns: job.Columns, MaxUnitRows: job.Decode.MaxUnitRows, FS: fsys,
		Partitions: PartitionKeys(job), Hashed: validHashed(job)}
}

// validHashed is job's hashed columns but those its parse refused (a
// column not in the job's columns): planning would refuse each again,
// and report it as an error of the inputs.
func validHashed(job *spec.Job) spec.Hashed {
	h := job.Hashed
	for name := range job.Hashed {
		if job.Invalid("hashed." + name) {
			if len(h) == len(job.Hashed) {
				h = maps.Clone(job.Hashed)
			}
			delete(h, name)
		}
	}
	return h
}

// schemaOptions is PlanOptions for every column: what a pipeline is
// compiled and checked against.
func schemaOptions(job *spec.Job, fsys decode.FS) decode.PlanOptions {
	o := PlanOptions(job, fsys)
	o.Columns = nil
	return o
}

// PartitionKeys is the job's partition columns as the planner takes them.
func PartitionKeys(job *spec.Job) []decode.PartitionKey {
	var keys []decode.PartitionKey
	types := map[string]decode.PartitionType{spec.PartitionString: decode.PartitionString,
		spec.PartitionInt64: decode.PartitionInt64, spec.PartitionDate: decode.PartitionDate}
	for _, p := range job.Partitions {
		keys = append(keys, decode.PartitionKey{Name: p.Name, Type: types[p.Type]})
	}
	return keys
}

// decodedLate is the late columns the decoder reads: the file columns
// among p.late.
func (p *processor) decodedLate() []int {
	var late []int
	for _, fi := range p.late {
		if fi < len(p.plan.Fields) {
			late = append(late, fi)
		}
	}
	return late
}

// column makes dst field fi's column for unit u: decoded for the rows of
// sel (nil: every row), or, for a partition column, rows rows of the
// unit's value.
func (p *processor) column(w *unitWorker, u *decode.Unit, fi int, sel []int32, rows int, dst *column.Column) error {
	nf := len(p.plan.Fields)
	if fi < nf {
		return w.dec.DecodeColumn(fi, sel, dst)
	}
	k := fi - nf
	if err := decode.FillPartition(&p.plan.Partitions[k], u.Partition[k], rows, dst); err != nil {
		return fmt.Errorf("%s: %w", u.File, err)
	}
	return nil
}

// fillPartitions appends the partition columns to a decoded unit's batch
// (a job without a pipeline outputs them after the file columns).
func (p *processor) fillPartitions(u decode.Unit, out *column.Batch) error {
	nf := len(p.plan.Fields)
	n := nf + len(p.plan.Partitions)
	if n == nf {
		return nil
	}
	if cap(out.Columns) < n {
		out.Columns = append(out.Columns[:nf:nf], make([]column.Column, n-nf)...)
	}
	out.Columns = out.Columns[:n]
	for k := range p.plan.Partitions {
		if err := p.column(nil, &u, nf+k, nil, out.Rows, &out.Columns[nf+k]); err != nil {
			return err
		}
	}
	return nil
}

// prunePartitions returns the files of paths whose partition values the
// job's filters (prune: ops.Program.Prune) may keep, adding the number
// left out to pruned. Files left out are never planned: their footers
// are not read, which on object storage is a request each. An error
// names a path without the declared keys.
func prunePartitions(paths []string, keys []decode.PartitionKey, prune func(func(string) (expr.Range, bool)) bool, pruned *int) ([]string, error) {
	if len(keys) == 0 || neverPrune.Load() {
		return paths, nil
	}
	fields := make([]decode.Field, len(keys))
	for i, k := range keys {
		fields[i] = k.Field()
	}
	var keep []string
	for _, path := range paths {
		values, err := decode.PartitionValues(path, keys)
		if err != nil {
			return nil, fmt.Errorf("plan %s: %w", path, err)
		}
		stats := func(name string) (expr.Range, bool) {
			for i := range fields {
				if fields[i].Name == name {
					return partitionRange(&fields[i], values[i], 1)
				}
			}
			return expr.Range{}, false
		}
		if prune(stats) {
			keep = append(keep, path)
		}
	}
	*pruned += len(paths) - len(keep)
	if len(keep) == 0 && len(paths) > 0 {
		return nil, fmt.Errorf("plan: the job's filters exclude all %d input files by their partition values: nothing to read", len(paths))
	}
	return keep, nil
}

// admittedFiles is what a job's admission plans (Check,
// EstimateFootprint): its inputs as inputFiles lists them, but, for a
// pipeline over partition columns, only the files its filters may keep,
// found without loading side tables. The run leaves out the same files
// (planPipeline), so admission opens no file the run would not. The
// files kept are planned as listed (jobInputs.listed): not listed again.
func admittedFiles(ctx context.Context, job *spec.Job, fsys decode.FS) (jobInputs, error) {
	in, err := inputFiles(ctx, job, fsys)
	keys := PartitionKeys(job)
	if err != nil || len(keys) == 0 || len(job.Pipeline) == 0 || neverPrune.Load() {
		return in, err
	}
	files, err := decode.PlanInputs(ctx, in.paths, decode.PlanOptions{FS: fsys, Listed: in.listed})
	if err != nil || len(files) == 0 {
		return in, err // planning says what is wrong
	}
	kept := jobInputs{paths: files, tables: in.tables, listed: true}
	schema, err := schemaPlan(ctx, files, kept.options(schemaOptions(job, fsys)))
	if err != nil {
		return jobInputs{}, err
	}
	prune, err := ops.Pruner(ctx, job, slices.Concat(schema.Fields, schema.Partitions), ops.Env{Seed: job.Seed, FS: fsys, InputBuckets: inputBuckets(in.tables), Unreadable: schema.Unreadable})
	if err != nil {
		return in, nil // the pipeline's check reports it, over every file
	}
	var pruned int
	kept.paths, err = prunePartitions(files, keys, prune, &pruned)
	return kept, err
}

// schemaPlan plans the first of files that its reader may open, for the
// columns a pipeline is compiled against: a file the reader may not open
// (a partition closed to the job's user) need not stop a job whose
// filters leave it out. If none may be opened, the first one's error is
// returned.
func schemaPlan(ctx context.Context, files []string, opts decode.PlanOptions) (*decode.Plan, error) {
	var first error
	for _, f := range files {
		p, err := decode.PlanFiles(ctx, []string{f}, opts)
		if err == nil {
			return p, nil
		}
		if first == nil {
			first = err
		}
		if !errors.Is(err, fs.ErrPermission) || len(opts.Partitions) == 0 {
			break
		}
	}
	return nil, first
}
