package spec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/spec"
)

// ParsePartial returns the job as far as it was read next to every error
// of the text: validation goes on after decode errors, without repeating
// them, and Invalid names the parts with errors.
func TestParsePartial(t *testing.T) {
	src := `inputs: [data/]
batch: {size: many}
batchsize: 3
columns: [a, a]
pipeline:
  - filter: "x > 1"
  - cast: {y: float8}
  - frob: {}
  - sequence: {column: s, lenght: 3}
`
	job, err := spec.ParsePartial(spec.Source{File: "shown.yaml", Dir: "/base"}, []byte(src))
	var es spec.Errors
	if job == nil || !errors.As(err, &es) {
		t.Fatalf("job %v, error %T %v", job, err, err)
	}
	want := []string{
		`shown.yaml:2: batch.size: want a whole number, got "many"`,
		`shown.yaml:3: batchsize: unknown field`,
		`shown.yaml:4: columns[1]: column "a" listed twice`,
		`shown.yaml:7: pipeline[1].cast.y: want int32, int64, float32, float64 or bfloat16, got "float8"`,
		`shown.yaml:8: pipeline[2]: unknown op "frob"`,
		`shown.yaml:9: pipeline[3].sequence.lenght: unknown field`,
	}
	if len(es) != len(want) {
		t.Fatalf("%d errors, want %d:\n%v", len(es), len(want), err)
	}
	for i, e := range es {
		if !strings.HasPrefix(e.Error(), want[i]) {
			t.Errorf("error %d: %v\nwant %s", i, e, want[i])
		}
	}
	if job.Inputs[0] != "/base/data/" {
		t.Errorf("input %q, want it relative to Dir", job.Inputs[0])
	}
	for path, bad := range map[string]bool{
		"pipeline[0]": false, "pipeline[1]": true, "pipeline[2]": true, "pipeline[3]": true,
		"columns[0]": false, "columns[1]": true, "inputs": false, "batch": true, "pipeline[1].cast": true, "pipeline[10]": false,
	} {
		if job.Invalid(path) != bad {
			t.Errorf("Invalid(%q) = %v, want %v", path, !bad, bad)
		}
	}
	if job.Line("pipeline[1].cast.y") != 7 || job.Line("columns[1]") != 4 {
		t.Errorf("lines %d %d", job.Line("pipeline[1].cast.y"), job.Line("columns[1]"))
	}
	// Parse keeps its contract: no job when there are errors.
	if j, err := spec.Parse("shown.yaml", []byte(src)); j != nil || err == nil {
		t.Errorf("Parse: %v, %v", j, err)
	}
	if j, err := spec.ParsePartial(spec.Source{File: "x.yaml"}, []byte("a: [")); j != nil || err == nil {
		t.Errorf("not YAML: %v, %v", j, err)
	}
}

// JoinErrors merges FieldErrors and Errors sorted by line, and returns any
// other error alone.
func TestJoinErrors(t *testing.T) {
	a := &spec.FieldError{Line: 5, Field: "a", Msg: "x"}
	b := spec.Errors{{Line: 2, Field: "b", Msg: "y"}, {Line: 9, Field: "c", Msg: "z"}}
	var es spec.Errors
	if !errors.As(spec.JoinErrors(nil, a, b), &es) || len(es) != 3 || es[0].Field != "b" || es[1].Field != "a" || es[2].Field != "c" {
		t.Errorf("joined %v", es)
	}
	if spec.JoinErrors(nil, nil) != nil {
		t.Error("nothing to join is not nil")
	}
	other := errors.New("disk")
	if spec.JoinErrors(a, other) != other {
		t.Error("a non-spec error is not returned alone")
	}
}
