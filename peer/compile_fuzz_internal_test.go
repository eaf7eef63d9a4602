package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/roots"
)

// compileFixture is a data root holding testdata/small's files, the job
// text of f.text with its names portable (ROOT/REL, as a requester sends
// them), the requester's columns and the units of part-00000.
type compileFixture struct {
	fs    rootsFS
	job   string
	cols  PlanColumns
	units []decode.Unit
}

func newCompileFixture(tb testing.TB, dir string) *compileFixture {
	data := filepath.Join(dir, "data")
	os.MkdirAll(data, 0o755)
	for i := range 3 {
		name := fmt.Sprintf("part-%05d.parquet", i)
		b, err := os.ReadFile(filepath.Join("../testdata/small", name))
		if err != nil {
			tb.Fatal(err)
		}
		os.WriteFile(filepath.Join(data, name), b, 0o644)
	}
	r, err := roots.New(map[string]string{"data": data})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	f := &fixture{data: data, shm: dir}
	job := strings.ReplaceAll(f.text("fuzz"), data+"/", "data/")
	job = strings.Replace(job, "inputs: ["+data+"]", "inputs: [data/part-00000.parquet]", 1)
	plan, err := decode.PlanFiles(context.Background(), []string{filepath.Join(data, "part-00000.parquet")}, decode.PlanOptions{MaxUnitRows: 700})
	if err != nil {
		tb.Fatal(err)
	}
	units := plan.Units
	for i := range units {
		units[i].File = "data/part-00000.parquet"
	}
	return &compileFixture{fs: rootsFS{r: r}, job: job, cols: PlanColumns{Fields: plan.Fields, Partitions: plan.Partitions}, units: units}
}

// ticket is a ticket for the fixture's i-th unit with plan as the
// requester's columns.
func (c *compileFixture) ticket(plan []byte, i int) *Ticket {
	return &Ticket{Version: Version, Job: c.job, Hash: jobHash([]byte(c.job)), Unit: c.units[i], Plan: plan, User: &User{}, Compute: Compute()}
}

// TestCompileFixture: the fuzzer's seed compiles, and its units compute:
// a fuzzer whose seed failed would test only refusals.
func TestCompileFixture(t *testing.T) {
	c := newCompileFixture(t, t.TempDir())
	b, err := json.Marshal(c.cols)
	if err != nil {
		t.Fatal(err)
	}
	up, err := compile(c.ticket(b, 0), c.fs, 1)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	defer up.Close()
	for i, u := range c.units {
		var out column.Batch
		if err := up.Compute(context.Background(), u, &out); err != nil {
			t.Fatalf("unit %d: %v", i, err)
		}
		if out.Rows == 0 {
			t.Fatalf("unit %d: no rows", i)
		}
	}
}

// FuzzCompileTicket: whatever columns a requester's ticket carries, a
// peer compiling the job against them (the side table, the ops) and
// computing a unit returns rows or an error and never panics. compile
// runs on a goroutine of its own in the server, where a panic would end
// the daemon. The fuzzer's bytes are edits of the true columns (editCols),
// so that every input is a plan a requester could send rather than JSON
// that fails to parse.
func FuzzCompileTicket(f *testing.F) {
	c := newCompileFixture(f, f.TempDir())
	f.Add([]byte{}, uint8(0))
	for i := range c.cols.Fields {
		for a := range byte(editAttrs) {
			f.Add([]byte{byte(i), a, 1}, uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, edits []byte, unit uint8) {
		b, err := json.Marshal(editCols(c.cols, edits))
		if err != nil {
			t.Fatal(err)
		}
		i := int(unit) % len(c.units)
		up, err := compile(c.ticket(b, i), c.fs, 1)
		if err != nil {
			return
		}
		defer up.Close()
		var out column.Batch
		up.Compute(context.Background(), c.units[i], &out)
	})
}

// editAttrs is the number of attributes editCols can change.
const editAttrs = 20

// editCols returns a copy of cols changed by edits, three bytes each: a
// field, one of its attributes and a value.
func editCols(cols PlanColumns, edits []byte) PlanColumns {
	fs := make([]decode.Field, len(cols.Fields))
	for i, f := range cols.Fields {
		f.Path = append([]string(nil), f.Path...)
		fs[i] = f
	}
	for ; len(edits) >= 3; edits = edits[3:] {
		if len(fs) == 0 {
			break
		}
		i, v := int(edits[0])%len(fs), edits[2]
		f := &fs[i]
		switch edits[1] % editAttrs {
		case 0:
			f.Kind = column.Kind(v % 4)
		case 1:
			f.DType = column.DType(v % 16)
		case 2:
			f.Nullable = !f.Nullable
		case 3:
			f.Leaf = int(v%48) - 1
		case 4:
			f.Physical = int32(v % 9)
		case 5:
			f.TypeLen = int32(v)
		case 6:
			f.Decimal, f.Scale = !f.Decimal, int32(v%20)
		case 7:
			f.Unsigned = !f.Unsigned
		case 8:
			f.Hash = uint64(v)
		case 9:
			f.MaxDef = int16(v % 5)
		case 10:
			f.MaxRep = int16(v % 3)
		case 11:
			f.RowDef = int16(v % 4)
		case 12:
			f.StoredPhysical, f.StoredTypeLen = int32(v%9), int32(v/9)
		case 13:
			f.Absent = !f.Absent
		case 14:
			f.Default = bytes.Repeat([]byte{v}, int(v%17))
		case 15:
			f.TimeUnit = []int64{0, 1, 1e3, 1e6, 86400e9}[v%5]
		case 16:
			f.Name = fs[int(v)%len(fs)].Name
		case 17:
			f.Path = append(f.Path, fs[int(v)%len(fs)].Name)
		case 18:
			fs = append(fs[:i], fs[i+1:]...)
		case 19:
			fs = append(fs, fs[int(v)%len(fs)])
		}
	}
	return PlanColumns{Fields: fs, Partitions: cols.Partitions}
}

// TestCompilePanicFailsTheJob: a panic while compiling a requester's job
// is that job's error, and the job is compiled afresh by its next unit;
// the daemon lives on.
func TestCompilePanicFailsTheJob(t *testing.T) {
	c := newCompileFixture(t, t.TempDir())
	b, err := json.Marshal(c.cols)
	if err != nil {
		t.Fatal(err)
	}
	compileHook = func() { panic("a compile that no check foresaw") }
	jobs := &jobCache{max: 4}
	_, _, err = jobs.get(context.Background(), slog.New(slog.DiscardHandler), c.ticket(b, 0), c.fs, 1)
	compileHook = nil
	if err == nil || !strings.Contains(err.Error(), "BUG: compiling the job panicked") {
		t.Fatalf("a compile that panicked: %v, want its panic as the error", err)
	}
	j, done, err := jobs.get(context.Background(), slog.New(slog.DiscardHandler), c.ticket(b, 0), c.fs, 1)
	if err != nil {
		t.Fatalf("the next unit of the job: %v", err)
	}
	defer done()
	var out column.Batch
	if err := j.up.Compute(context.Background(), c.units[0], &out); err != nil || out.Rows == 0 {
		t.Fatalf("the next unit: %d rows, %v", out.Rows, err)
	}
}
