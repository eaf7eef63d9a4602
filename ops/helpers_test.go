package ops_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/ops"
	"github.com/lastmile/lastmile/spec"
	"github.com/parquet-go/parquet-go"
)

// Column builders. A nil valid means no nulls; null rows get zeros (or
// nothing) as column.Column requires.

func f64col(name string, vals []float64, valid []byte) column.Column {
	c := column.Column{Name: name, Kind: column.Fixed, DType: column.Float64, Width: 1, Len: len(vals), Valid: valid}
	for i, v := range vals {
		if valid != nil && valid[i] == 0 {
			v = 0
		}
		c.Data = binary.LittleEndian.AppendUint64(c.Data, math.Float64bits(v))
	}
	return c
}

func i64col(name string, vals []int64, valid []byte) column.Column {
	c := column.Column{Name: name, Kind: column.Fixed, DType: column.Int64, Width: 1, Len: len(vals), Valid: valid}
	for i, v := range vals {
		if valid != nil && valid[i] == 0 {
			v = 0
		}
		c.Data = binary.LittleEndian.AppendUint64(c.Data, uint64(v))
	}
	return c
}

func i32col(name string, vals []int32, valid []byte) column.Column {
	c := column.Column{Name: name, Kind: column.Fixed, DType: column.Int32, Width: 1, Len: len(vals), Valid: valid}
	for i, v := range vals {
		if valid != nil && valid[i] == 0 {
			v = 0
		}
		c.Data = binary.LittleEndian.AppendUint32(c.Data, uint32(v))
	}
	return c
}

func f32col(name string, vals []float32, valid []byte) column.Column {
	c := column.Column{Name: name, Kind: column.Fixed, DType: column.Float32, Width: 1, Len: len(vals), Valid: valid}
	for i, v := range vals {
		if valid != nil && valid[i] == 0 {
			v = 0
		}
		c.Data = binary.LittleEndian.AppendUint32(c.Data, math.Float32bits(v))
	}
	return c
}

func strcol(name string, vals []string, valid []byte) column.Column {
	c := column.Column{Name: name, Kind: column.Bytes, DType: column.Uint8, Width: 1, Len: len(vals), Valid: valid, Offsets: []int64{0}}
	for i, v := range vals {
		if valid == nil || valid[i] != 0 {
			c.Data = append(c.Data, v...)
		}
		c.Offsets = append(c.Offsets, int64(len(c.Data)))
	}
	return c
}

func listcol(name string, rows [][]int64, valid []byte) column.Column {
	c := column.Column{Name: name, Kind: column.List, DType: column.Int64, Width: 1, Len: len(rows), Valid: valid, Offsets: []int64{0}}
	n := int64(0)
	for i, r := range rows {
		if valid == nil || valid[i] != 0 {
			for _, v := range r {
				c.Data = binary.LittleEndian.AppendUint64(c.Data, uint64(v))
				n++
			}
		}
		c.Offsets = append(c.Offsets, n)
	}
	return c
}

func batchOf(cols ...column.Column) *column.Batch {
	b := &column.Batch{Columns: cols}
	if len(cols) > 0 {
		b.Rows = cols[0].Len
	}
	return b
}

// fieldsOf describes a batch's columns as an input schema.
func fieldsOf(b *column.Batch) []decode.Field {
	var fs []decode.Field
	for _, c := range b.Columns {
		fs = append(fs, decode.Field{Name: c.Name, Kind: c.Kind, DType: c.DType, Nullable: c.Valid != nil})
	}
	return fs
}

// Readers of output columns.

func ints(t *testing.T, b *column.Batch, name string) []int64 {
	t.Helper()
	c := col(t, b, name)
	var out []int64
	switch c.DType {
	case column.Int64:
		out = slices.Clone(c.Int64s()[:c.Len*c.Width])
	case column.Int32:
		for _, v := range c.Int32s()[:c.Len*c.Width] {
			out = append(out, int64(v))
		}
	default:
		t.Fatalf("column %q is %v", name, c.DType)
	}
	return out
}

func floats(t *testing.T, b *column.Batch, name string) []float64 {
	t.Helper()
	c := col(t, b, name)
	var out []float64
	switch c.DType {
	case column.Float32:
		for _, v := range c.Float32s()[:c.Len] {
			out = append(out, float64(v))
		}
	case column.Float64:
		out = slices.Clone(c.Float64s()[:c.Len])
	default:
		t.Fatalf("column %q is %v", name, c.DType)
	}
	return out
}

func strs(t *testing.T, b *column.Batch, name string) []string {
	t.Helper()
	c := col(t, b, name)
	var out []string
	for i := range c.Len {
		out = append(out, string(c.Row(i)))
	}
	return out
}

func lists(t *testing.T, b *column.Batch, name string) [][]int64 {
	t.Helper()
	c := col(t, b, name)
	var out [][]int64
	vals := c.Int64s()
	for i := range c.Len {
		out = append(out, slices.Clone(vals[c.Offsets[i]:c.Offsets[i+1]]))
	}
	return out
}

func valid(t *testing.T, b *column.Batch, name string) []byte {
	t.Helper()
	return col(t, b, name).Valid
}

func col(t *testing.T, b *column.Batch, name string) *column.Column {
	t.Helper()
	c := b.Col(name)
	if c == nil {
		t.Fatalf("no column %q in %v", name, names(b))
	}
	return c
}

func names(b *column.Batch) []string {
	var out []string
	for _, c := range b.Columns {
		out = append(out, c.Name)
	}
	return out
}

// Jobs.

// job parses a job spec around the given pipeline lines (each "- op").
func job(t testing.TB, dir string, pipeline ...string) *spec.Job {
	t.Helper()
	j, err := parseJob(dir, pipeline...)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func parseJob(dir string, pipeline ...string) (*spec.Job, error) {
	src := "version: 1\ninputs: [x]\nseed: 7\nbatch: {size: 8}\npipeline:\n"
	if len(pipeline) == 0 {
		src = "version: 1\ninputs: [x]\nseed: 7\nbatch: {size: 8}\n"
	}
	for _, p := range pipeline {
		src += "  " + p + "\n"
	}
	file := "job.yaml"
	if dir != "" {
		file = filepath.Join(dir, "job.yaml")
	}
	return spec.Parse(file, []byte(src))
}

func compile(t testing.TB, b *column.Batch, dir string, pipeline ...string) *ops.Program {
	t.Helper()
	p, err := ops.Compile(context.Background(), job(t, dir, pipeline...), fieldsOf(b), ops.Env{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// run runs p over b the way the engine does: Select on the Early columns
// of every row, then Apply on the Needs columns of the rows kept.
func run(t testing.TB, p *ops.Program, b *column.Batch) *column.Batch {
	t.Helper()
	out, err := runErr(p, p.NewState(), b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func runErr(p *ops.Program, st *ops.State, b *column.Batch) (*column.Batch, error) {
	early := project(b, p.Early())
	sel, err := st.Select(early, nil)
	if err != nil {
		return nil, err
	}
	if !slices.IsSorted(sel) {
		return nil, fmt.Errorf("select returned unsorted rows %v", sel)
	}
	var late column.Batch
	late.Gather(project(b, p.Needs()), sel)
	out := new(column.Batch)
	if err := st.Apply(&late, out); err != nil {
		return nil, err
	}
	if err := out.Check(); err != nil {
		return nil, fmt.Errorf("output: %v", err)
	}
	if err := checkSchema(p, out); err != nil {
		return nil, err
	}
	return out, nil
}

// project returns a batch of b's named columns, deep copies.
func project(b *column.Batch, cols []string) *column.Batch {
	out := &column.Batch{Rows: b.Rows}
	for _, name := range cols {
		c := b.Col(name)
		if c == nil {
			panic("no column " + name)
		}
		cp := *c
		cp.Data = slices.Clone(c.Data)
		cp.Offsets = slices.Clone(c.Offsets)
		cp.Valid = slices.Clone(c.Valid)
		out.Columns = append(out.Columns, cp)
	}
	return out
}

// checkSchema checks out against p.Output().
func checkSchema(p *ops.Program, out *column.Batch) error {
	want := p.Output()
	if len(want) != len(out.Columns) {
		return fmt.Errorf("output has columns %v, schema %v", names(out), want)
	}
	for i, f := range want {
		c := &out.Columns[i]
		if c.Name != f.Name || c.Kind != f.Kind || c.DType != f.DType || c.Width != f.Width {
			return fmt.Errorf("output column %d is %s %v %v width %d, schema says %+v", i, c.Name, c.Kind, c.DType, c.Width, f)
		}
		if !f.Nullable && c.Valid != nil {
			return fmt.Errorf("output column %s has validity but is not nullable", c.Name)
		}
	}
	return nil
}

func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v\nwant it to contain %q", err, want)
	}
}

// Side tables.

type intRow struct {
	ID    int64  `parquet:"id"`
	Score *int64 `parquet:"score,optional"`
	Tag   string `parquet:"tag"`
}

type strRow struct {
	Name  string  `parquet:"name"`
	Score float32 `parquet:"score"`
}

func writeTable[T any](t testing.TB, path string, rows []T) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := parquet.WriteFile(path, rows); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

func asDataError(err error, target **ops.DataError) bool { return errors.As(err, target) }
