package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
	"github.com/parquet-go/parquet-go/format"
)

// runSchema prints the columns of a job's inputs, or of Parquet files, as
// lastmile reads them: the names a spec's columns and expressions use
// (struct fields, map keys and values, lists of structs' fields), their
// types, and the columns every-column leaves out with why.
func runSchema(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("schema", stderr)
	asJSON := fs.Bool("json", false, "print the plan's fields, partitions and unreadable columns as JSON")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: give a job spec, or Parquet files, globs or directories", errUsage)
	}
	fsys, err := inputFS()
	if err != nil {
		return err
	}
	inputs, opts := fs.Args(), decode.PlanOptions{FS: fsys}
	if fs.NArg() == 1 && isSpecPath(fs.Arg(0)) {
		if inputs, opts, err = specInputs(ctx, fs.Arg(0), fsys); err != nil {
			return err
		}
	}
	plan, err := decode.PlanFiles(ctx, inputs, opts)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Files      int                 `json:"files"`
			Rows       int64               `json:"rows"`
			Fields     []decode.Field      `json:"fields"`
			Partitions []decode.Field      `json:"partitions,omitempty"`
			Unreadable []decode.Unreadable `json:"unreadable,omitempty"`
		}{len(plan.Files), plan.Rows, plan.Fields, plan.Partitions, plan.Unreadable})
	}
	return printSchema(stdout, plan)
}

func isSpecPath(p string) bool {
	if st, err := os.Stat(p); err != nil || st.IsDir() {
		return false
	}
	for _, ext := range []string{".yaml", ".yml", ".json"} {
		if strings.HasSuffix(p, ext) {
			return true
		}
	}
	return false
}

// specInputs is the job at path's input files and how they are planned,
// every column (the spec's columns and pipeline are not needed for
// that, and may be what is being written).
func specInputs(ctx context.Context, path string, fsys decode.FS) ([]string, decode.PlanOptions, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, decode.PlanOptions{}, fmt.Errorf("read job spec: %w", err)
	}
	job, perr := spec.ParsePartial(spec.Source{File: path}, data)
	if job == nil || job.Invalid("inputs") {
		return nil, decode.PlanOptions{}, perr
	}
	inputs, opts, err := engine.InputPlan(ctx, job, fsys)
	if err != nil {
		return nil, decode.PlanOptions{}, err
	}
	opts.Columns = nil
	return inputs, opts, nil
}

func printSchema(w io.Writer, plan *decode.Plan) error {
	files := fmt.Sprintf("%d files", len(plan.Files))
	if len(plan.Files) == 1 {
		files = "1 file"
	}
	fmt.Fprintf(w, "%s, %d rows, %d units; columns as lastmile reads them (from %s):\n",
		files, plan.Rows, len(plan.Units), plan.Files[0].Path)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  column\ttype\tnull\tfrom")
	notes := changedIn(plan)
	for i, f := range plan.Fields {
		from := fieldFrom(f)
		if notes[i] != "" && from != "" {
			from += "; "
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", f.Name, typeName(f), yesNo(f.Nullable), from+notes[i])
	}
	for _, f := range plan.Partitions {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", f.Name, typeName(f), "", "partition directories")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(plan.Unreadable) > 0 {
		fmt.Fprintln(w, "not read (left out of every column; naming one is an error):")
		for _, u := range plan.Unreadable {
			fmt.Fprintf(w, "  %s: %s\n", u.Name, u.Why)
		}
	}
	return nil
}

// typeName is a field's type as expressions and the ring see it.
func typeName(f decode.Field) string {
	dt := f.DType.String()
	switch f.Kind {
	case column.List:
		return "list<" + dt + ">"
	case column.Bytes:
		return "string"
	}
	return dt
}

// fieldFrom says what a field is read from where that is not plain.
func fieldFrom(f decode.Field) string {
	var s []string
	if f.Hash > 0 {
		s = append(s, fmt.Sprintf("strings hashed mod %d", f.Hash))
	}
	if f.Decimal {
		s = append(s, fmt.Sprintf("DECIMAL, scale %d", f.Scale))
	}
	if f.Unsigned {
		s = append(s, "unsigned")
	}
	if u := f.Counts(); u > 0 {
		what := "timestamp in " + column.UnitName(u) // what timestamp() counts in a filter
		if u == 86400e9 {
			what = "date"
		}
		s = append(s, what)
	}
	if f.StoredAs != "" { // an Iceberg table's column, renamed since (decode/fieldid.go)
		s = append(s, fmt.Sprintf("named %s in the first file", f.StoredAs))
	} else if strings.Contains(f.Name, ".") { // a struct's field, a map's keys or values, a list of structs' field
		s = append(s, "parquet "+strings.Join(f.Path, "."))
	}
	return strings.Join(s, "; ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return ""
}

// changedIn says, for each of plan's fields, in how many of its files an
// Iceberg table's schema change shows (decode/fieldid.go, promote.go):
// the column added since they were written, so that they read it as
// nulls or as its default, or promoted since, so that they store it
// narrower; "" where none.
func changedIn(plan *decode.Plan) []string {
	absent := make([]map[string]bool, len(plan.Fields))
	narrow := make([]map[string]format.Type, len(plan.Fields))
	defaulted := make([]bool, len(plan.Fields))
	for _, u := range plan.Units {
		for i, c := range u.Chunks {
			switch {
			case i >= len(plan.Fields):
			case c.Absent:
				if absent[i] == nil {
					absent[i] = map[string]bool{}
				}
				absent[i][u.File], defaulted[i] = true, c.Default != nil
			case c.Physical != 0:
				if narrow[i] == nil {
					narrow[i] = map[string]format.Type{}
				}
				narrow[i][u.File] = format.Type(c.Physical)
			}
		}
	}
	notes := make([]string, len(plan.Fields))
	n := len(plan.Files)
	for i := range plan.Fields {
		reads := "null"
		if defaulted[i] {
			reads = "its default"
		}
		switch k := len(absent[i]); {
		case k == n && k > 0:
			notes[i] = "in no file yet (added since): every row " + reads
		case k > 0:
			notes[i] = fmt.Sprintf("added since %d of %d files were written: %s there", k, n, reads)
		}
		if len(narrow[i]) > 0 {
			var types []string
			for _, t := range narrow[i] {
				if name := t.String(); !slices.Contains(types, name) {
					types = append(types, name)
				}
			}
			slices.Sort(types)
			how := "(promoted since): widened"
			switch tu := plan.Fields[i].TimeUnit; {
			case slices.Contains(types, format.Int96.String()):
				how = "(as Hive and Spark wrote timestamps): read as " + column.UnitName(tu)
			case tu > 0 && slices.Contains(types, format.Int32.String()):
				how = "(dates, a timestamp since): each day's first instant, in " + column.UnitName(tu)
			}
			note := fmt.Sprintf("stored as %s in %d of %d files %s", strings.Join(types, " or "), len(narrow[i]), n, how)
			if notes[i] != "" { // added since some files, promoted since others
				note = notes[i] + "; " + note
			}
			notes[i] = note
		}
	}
	return notes
}
