package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/datagen"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

// checkSpec parses src as the file bad.yaml and checks it against
// testdata/small, as lastmile run and lastmiled do.
func checkSpec(t *testing.T, src string) error {
	t.Helper()
	abs, err := filepath.Abs("../testdata/small")
	if err != nil {
		t.Fatal(err)
	}
	job, perr := spec.ParsePartial(spec.Source{File: "bad.yaml", Dir: "/"}, []byte(strings.ReplaceAll(src, "DATA", abs)))
	if job == nil {
		return perr
	}
	return engine.Check(context.Background(), job, perr, nil)
}

// Every error of a spec is reported at once, syntactic and semantic,
// sorted by line, and errors that only follow from an earlier one are not.
func TestCheckReportsAllErrors(t *testing.T) {
	spam := filepath.Join(t.TempDir(), "spam.parquet")
	if err := datagen.WriteSpamUsers(context.Background(), spam, fixtureConfig(t), 0.1); err != nil {
		t.Fatal(err)
	}
	head := "inputs: [DATA]\nbatch: {size: 64}\npipeline:\n" // ops from line 4
	cases := []struct {
		name string
		ops  string
		want []string // each error, in order: "LINE: FIELD: substring"
	}{
		{"four kinds", `  - filter: "lable == 1"
  - cast: {dense_0: float16}
  - join: {kind: left, table: SPAM, on: user_id, columns: [scroe]}
  - sequence: {column: seq_0, lenght: 8}
`, []string{
			`4: pipeline[0].filter: unknown column "lable" (did you mean "label"?)`,
			`5: pipeline[1].cast.dense_0: want int32, int64, float32, float64 or bfloat16, got "float16"`,
			`6: pipeline[2].join.columns: side table SPAM has no column "scroe"`,
			`7: pipeline[3].sequence.lenght: unknown field (allowed: column, length,`,
		}},
		{"unknown op next to semantic errors", `  - filtr: "label == 1"
  - map: {x: "dense_0 * 2", y: "nope + 1"}
  - filter: "x > 0"
  - filter: "cat_99 == 1"
`, []string{
			`4: pipeline[0]: unknown op "filtr"`,
			`5: pipeline[1].map.y: unknown column "nope"`,
			`7: pipeline[3].filter: unknown column "cat_99"`,
		}},
		{"no cascade from a bad op", `  - map: {score: "dense_0 +"}
  - filter: "score > 1"
  - sequence: {column: seq_0, length: 8, output: s}
  - select: [score, s, lbl]
`, []string{
			`4: pipeline[0].map.score:`,
			`7: pipeline[3].select[2]: unknown column "lbl"`,
		}},
		{"every entry of a map, cast and drop", `  - map: {a: "nope1 + 1", b: "dense_0 * 2", c: "nope2"}
  - cast: {dense_9: float32, cat_0: int32, seq_9: int64}
  - drop: [a, zz]
  - filter: "b > 0"
  - nulls: {policy: fill, columns: [nn1, b, nn2]}
`, []string{
			`4: pipeline[0].map.a: unknown column "nope1"`,
			`4: pipeline[0].map.c: unknown column "nope2"`,
			`5: pipeline[1].cast.dense_9: unknown column "dense_9"`,
			`5: pipeline[1].cast.seq_9: unknown column "seq_9"`,
			`6: pipeline[2].drop[1]: unknown column "zz"`,
			`8: pipeline[4].nulls.columns: unknown column "nn1"`,
			`8: pipeline[4].nulls.columns: unknown column "nn2"`,
		}},
		{"columns and ops", `  - filter: "dense_0 > 0"
columns: [row_id, labl, dense_0]
batch: {size: 0}
pipeline2: []
`, []string{
			`5: columns[1]: unknown column "labl" in the input (did you mean "label"?)`,
			`6: batch: given twice`,
			`7: pipeline2: unknown field (allowed: version,`,
		}},
		{"a missing column is reported where it is projected", `  - filter: "labl == 1"
  - map: {x: "labl + 1"}
  - filter: "dense_0 > 0 and cat_0 == 1"
columns: [row_id, labl, dense_0]
`, []string{
			`6: pipeline[2].filter: column "cat_0" is in the input but not in the job's columns; add it there`,
			`7: columns[1]: unknown column "labl" in the input (did you mean "label"?)`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkSpec(t, head+strings.ReplaceAll(tc.ops, "SPAM", spam))
			var es spec.Errors
			if !errors.As(err, &es) {
				t.Fatalf("error %T %v, want spec.Errors", err, err)
			}
			var got []string
			for _, e := range es {
				if e.File != "bad.yaml" {
					t.Errorf("error %v does not name the file bad.yaml", e)
				}
				got = append(got, strings.ReplaceAll(fmt.Sprintf("%d: %s: %s", e.Line, e.Field, e.Msg), spam, "SPAM"))
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d errors, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("error %d:\n%s\nwant it to start with\n%s", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// A spec without errors checks clean, and one whose only error is
// semantic gives it alone.
func TestCheckCleanAndSingle(t *testing.T) {
	if err := checkSpec(t, "inputs: [DATA]\nbatch: {size: 64}\npipeline:\n  - filter: \"label == 1\"\n"); err != nil {
		t.Fatal(err)
	}
	err := checkSpec(t, "inputs: [DATA]\nbatch: {size: 64}\npipeline:\n  - filter: \"labl == 1\"\n")
	if err == nil || !strings.Contains(err.Error(), `bad.yaml:4: pipeline[0].filter: unknown column "labl"`) {
		t.Fatalf("error %v", err)
	}
}

// FuzzCheck: whatever the text, checking a spec neither panics nor
// reports an error other than spec errors or inputs it cannot plan.
func FuzzCheck(f *testing.F) {
	f.Add("inputs: [DATA]\nbatch: {size: 64}\npipeline:\n  - filter: \"lable == 1\"\n  - cast: {dense_0: float16}\n")
	f.Add("inputs: [DATA]\nbatch: {size: 64}\ncolumns: [labl]\npipeline:\n  - map: {a: \"labl\", b: 1}\n  - select: [a, b, c]\n")
	f.Add("inputs: [DATA]\nbatch: {size: x}\npipeline:\n  - sequence: {column: seq_0, length: -1}\n  - drop: [seq_0]\n")
	f.Add("inputs: [DATA]\nbatch: {size: 64}\npipeline:\n  - stack: {output: d, columns: [dense_0, nope]}\n  - jagged: {output: s, keys: [cat_0, {column: seq_0, max_length: -2}]}\n")
	f.Fuzz(func(t *testing.T, src string) {
		if strings.Contains(src, "table") || strings.Contains(src, "/") {
			return // no walking the file system
		}
		err := checkSpec(t, src)
		var fe *spec.FieldError
		if err != nil && !errors.As(err, &fe) && !strings.HasPrefix(err.Error(), "plan job") {
			t.Fatalf("error %T %v, want spec errors", err, err)
		}
	})
}

// TestCheckNamesTheMissingInput: an input that cannot be planned was
// reported bare ("plan job "tiny": plan: stat ../x: no such file or
// directory"), without the file, line or field every other spec error
// has, and the daemon's 400 had no errors list. It is now an error of the
// input it names, that still wraps planning's error (the daemon answers 403
// to fs.ErrPermission).
func TestCheckNamesTheMissingInput(t *testing.T) {
	err := checkSpec(t, "inputs:\n  - DATA\n  - /nonexistent/nosuch\nbatch: {size: 64}\n")
	var fe *spec.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("%v: not a FieldError", err)
	}
	if fe.File != "bad.yaml" || fe.Line != 3 || fe.Field != "inputs[1]" || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s (line %d, field %q, ErrNotExist %v): want bad.yaml:3: inputs[1], wrapping ErrNotExist",
			err, fe.Line, fe.Field, errors.Is(err, fs.ErrNotExist))
	}
	if !strings.Contains(fe.Msg, "/nonexistent/nosuch") {
		t.Fatalf("message %q does not name the path", fe.Msg)
	}
}

// TestCheckMissingTableIsNotRelative: an Iceberg table named by an
// absolute metadata path that is not there is reported without the hint
// for relative inputs: "iceberg:/t/metadata/v1.metadata.json" neither
// starts with '/' nor holds "://", and was told "(a relative input is
// relative to the spec's directory)".
func TestCheckMissingTableIsNotRelative(t *testing.T) {
	for _, ref := range []string{"iceberg:/nonexistent/t/metadata/v1.metadata.json", "iceberg:file:///nonexistent/t/metadata/v1.metadata.json"} {
		err := checkSpec(t, fmt.Sprintf("inputs: [%q]\nbatch: {size: 64}\n", ref))
		if !errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), "relative") {
			t.Errorf("%s: %v; want fs.ErrNotExist, without the hint for relative inputs", ref, err)
		}
	}
}

// TestCheckHashedColumnOnce: a hashed column the job does not read was
// reported twice, once by the spec ("hashed.nope: not in the job's
// columns") and again by planning, as an error of the inputs at their
// line. With every column read, planning alone can tell, and its error is
// now the hashed key's.
func TestCheckHashedColumnOnce(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"not in columns", "inputs: [DATA]\ncolumns: [row_id]\nbatch: {size: 64}\nhashed:\n  nope: 1000\n",
			`bad.yaml:5: hashed.nope: "nope" is not in the job's columns`},
		{"not in the input", "inputs: [DATA]\nbatch: {size: 64}\nhashed:\n  nope: 1000\n",
			`bad.yaml:4: hashed.nope: `},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkSpec(t, tc.src)
			if err == nil {
				t.Fatal("no error")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], tc.want) {
				t.Fatalf("%s\nwant one error starting %q", err, tc.want)
			}
		})
	}
}
