package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

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

// jobInputs is what the planner reads for a job (inputFiles).
type jobInputs struct {
	paths  []string        // the names to plan
	tables []iceberg.Input // the job's inputs, its tables scanned
	// listed is whether paths are files as a listing found them (a
	// table's data files, what a plain input listed): the planner plans
	// them by name, listing and stating nothing again
	// (decode.PlanOptions.Listed).
	listed bool
}

// options returns opts for planning in.paths: with the tables' field ids
// (withFieldIDs), and Listed when the paths are listed files.
func (in jobInputs) options(opts decode.PlanOptions) decode.PlanOptions {
	opts = withFieldIDs(opts, in.tables)
	opts.Listed = in.listed
	return opts
}

// inputFiles lists what the planner reads for job (nil fsys:
// decode.OSFS): its plain inputs as they are (files, globs, directories,
// object prefixes), the data files of its Iceberg tables' snapshots, and
// the tables' scans. In a job with a table and another input the plain
// inputs are listed here, for sharedDataFiles, and each is replaced, in
// the paths and the scans, by the files it lists. The paths of a job
// with a table are thus all files a listing found (listed): the planner
// plans those names and lists or stats nothing again (a prefix of many
// objects is one round of LIST requests, not two or three, and an
// object without the ".parquet" suffix is not listed once more as the
// prefix it might be).
func inputFiles(ctx context.Context, job *spec.Job, fsys decode.FS) (jobInputs, error) {
	ins, err := iceberg.Opener{FS: fsys}.Expand(ctx, job.Inputs)
	if err != nil {
		return jobInputs{}, err
	}
	if hasTables(ins) && len(ins) > 1 {
		listed, err := listPlain(ctx, fsys, ins)
		if err != nil {
			return jobInputs{}, err
		}
		if err := sharedDataFiles(fsys, ins, listed); err != nil {
			return jobInputs{}, err
		}
		ins = asListed(ins, listed)
	}
	paths, _, err := iceberg.Files(ins, nil)
	return jobInputs{paths: paths, tables: ins, listed: hasTables(ins)}, err
}

// listPlain lists the files each of ins names: a table's data files, and
// what a plain input reaches (decode.ExpandInputs, each input once).
func listPlain(ctx context.Context, fsys decode.FS, ins []iceberg.Input) ([][]string, error) {
	listed := make([][]string, len(ins))
	for i, in := range ins {
		if in.Scan != nil {
			listed[i] = iceberg.Paths(in.Scan.Files)
			continue
		}
		files, err := decode.ExpandInputs(ctx, fsys, []string{in.Plain})
		if err != nil {
			return nil, err
		}
		listed[i] = files
	}
	return listed, nil
}

// asListed returns ins with each plain input replaced by the files it
// lists (listed, by input), in order. They are planned as listed files
// (decode.PlanOptions.Listed): a name holding a glob character ('*',
// '?', '[') is a file, not a pattern (read as one, "part[1].parquet" was
// the glob "part1.parquet", which matched nothing, and its rows were
// left out without a word), and a name without the ".parquet" suffix is
// an object, not a prefix to list.
func asListed(ins []iceberg.Input, listed [][]string) []iceberg.Input {
	var out []iceberg.Input
	for i, in := range ins {
		if in.Scan != nil {
			out = append(out, in)
			continue
		}
		for _, f := range listed[i] {
			out = append(out, iceberg.Input{Plain: f})
		}
	}
	return out
}

// sharedDataFiles refuses a job in which an Iceberg table's data file is
// also named by another input: a plain one (a file, glob, directory or
// prefix reaching it) or another table or snapshot. A file is planned
// once however many inputs name it, but the inputs disagree on what it
// holds: a table reads it without the rows its snapshot deletes, by its
// field ids and with its partition values, a plain input reads it whole
// and by name. Whichever view won, the other input's rows would be
// silently wrong. The same table at the same snapshot named twice agrees
// with itself and is read once. listed holds the files each input names
// (listPlain); files are compared as fileIDs tells them apart.
func sharedDataFiles(fsys decode.FS, ins []iceberg.Input, listed [][]string) error {
	ids := newFileIDs(fsys, listed)
	type owner struct {
		name, path string
		snap       int64
	}
	byFile := map[fileID]owner{}
	for i, in := range ins {
		if in.Scan == nil {
			continue
		}
		me := owner{in.Scan.Table, "", in.Scan.SnapshotID}
		for _, p := range listed[i] {
			key := ids.of(p)
			if o, ok := byFile[key]; ok && (o.snap != me.snap || tableKey(o.name) != tableKey(me.name)) {
				return fmt.Errorf("plan: the data file %s belongs to Iceberg table %s at snapshot %d and to %s at snapshot %d; each reads it with its own deleted rows and schema, and a file is read once: name one of them", p, o.name, o.snap, me.name, me.snap)
			}
			me.path = p
			byFile[key] = me
		}
	}
	for i, in := range ins {
		if in.Scan != nil {
			continue
		}
		for _, p := range listed[i] {
			o, ok := byFile[ids.of(p)]
			if !ok {
				continue
			}
			what := "reaches " + p + ", which is"
			if p == in.Plain {
				what = "is"
			}
			if p != o.path {
				what += " " + o.path + ","
			}
			return fmt.Errorf("plan: the input %q %s a data file of Iceberg table %s (snapshot %d); a file is read once, and the table reads it without the rows it deletes while a plain input reads it whole: read it through the table only, or leave it out of %q", in.Plain, what, o.name, o.snap, in.Plain)
		}
	}
	return nil
}

// fileID is what sharedDataFiles compares a file by. A local file is
// its device and inode, so that a symlink to it (or to a directory above
// it), a hard link, a bind mount and any other spelling ("dir//f",
// "dir/./f") are the one file they are: going by the name, the planner
// would read it twice, once with a table's deletes and once whole. An
// object, and a local file that cannot be stated (planning it says
// why), is its name as fileKey spells it.
type fileID struct {
	name     string
	dev, ino uint64
}

// fileIDs tells the files of a job's inputs apart.
type fileIDs struct {
	fsys  decode.FS
	local bool // whether local files are stated: more than one input names some
}

// newFileIDs returns the fileIDs of the files the inputs name (listed,
// by input). Local files are stated, through fsys and so as the job's
// user (never as the daemon: a path is the user's to resolve), only when
// two inputs or more name local files: otherwise no two inputs can share
// one, and a table of many files costs no stat each.
func newFileIDs(fsys decode.FS, listed [][]string) fileIDs {
	if fsys == nil {
		fsys = decode.OSFS{}
	}
	n := 0
	for _, files := range listed {
		if slices.ContainsFunc(files, isLocal) {
			n++
		}
	}
	return fileIDs{fsys: fsys, local: n > 1}
}

// of returns p's fileID.
func (ids fileIDs) of(p string) fileID {
	if ids.local && isLocal(p) {
		if fi, err := ids.fsys.Stat(p); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				return fileID{dev: uint64(st.Dev), ino: st.Ino}
			}
		}
	}
	return fileID{name: fileKey(p)}
}

func isLocal(p string) bool { return !strings.Contains(p, "://") }

// fileKey is the name a file is compared by when it is not stated
// (fileID): a local path cleaned, since "dir//f", "dir/./f" and "dir/f"
// are one file; an object URL as it is, since its key is a name ("a//b"
// is another object than "a/b").
func fileKey(p string) string {
	if !isLocal(p) {
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
// PlanOptions with the tables' field ids. In a job with a table each
// plain input is the files it lists, and the options plan every name as
// listed (decode.PlanOptions.Listed). Code that plans a job's input
// itself passes these to decode.PlanFiles.
func InputPlan(ctx context.Context, job *spec.Job, fsys decode.FS) ([]string, decode.PlanOptions, error) {
	in, err := inputFiles(ctx, job, fsys)
	if err != nil {
		return nil, decode.PlanOptions{}, err
	}
	return in.paths, in.options(PlanOptions(job, fsys)), nil
}
