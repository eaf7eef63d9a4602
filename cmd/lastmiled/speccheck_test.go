package main_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/datagen"
)

// TestSubmitChecksSpec submits specs with errors the text alone does not
// show (columns the input lacks, a side table's missing column) to a real
// lastmiled: each is refused at submit, with a 400 listing every error of
// the file, syntactic and semantic, each naming the submitted file, its
// line and field, and no job is created.
func TestSubmitChecksSpec(t *testing.T) {
	e := newEnv(t)
	e.start()
	side := filepath.Join(t.TempDir(), "spam.parquet")
	cfg := datagen.DefaultConfig()
	cfg.Rows = 10000
	if err := datagen.WriteSpamUsers(context.Background(), side, cfg, 0.1); err != nil {
		t.Fatal(err)
	}
	head := "name: chk\ninputs: [" + smallData + "]\nbatch: {size: 100}\npipeline:\n" // ops from line 5
	cases := []struct {
		name, file, ops string
		want            []string // "LINE FIELD: substring", in order
	}{
		{"missing column", "bad2.yaml", `  - filter: "lable == 1"` + "\n", []string{
			`5 pipeline[0].filter: unknown column "lable" (did you mean "label"?)`,
		}},
		{"four mistakes", "specs/bad3.yaml", `  - filter: "dense_0 > 0 and cat_9 == 1"
  - cast: {dense_1: float8}
  - join: {kind: left, table: ` + side + `, on: user_id, columns: [scroe]}
  - sequence: {column: seq_0, length: 8, pad: 0}
`, []string{
			`5 pipeline[0].filter: unknown column "cat_9"`,
			`6 pipeline[1].cast.dense_1: want int32, int64, float32, float64 or bfloat16, got "float8"`,
			`7 pipeline[2].join.columns: side table ` + side + ` has no column "scroe"`,
			`8 pipeline[3].sequence.pad: unknown field`,
		}},
		{"daemon rules next to pipeline errors", "", `  - map: {x: "row_id + nope"}
ring: {dir: /etc}
`, []string{
			`5 pipeline[0].map.x: unknown column "nope"`,
			`6 ring.dir: lastmiled creates rings in`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ej errJSON
			body := map[string]any{"spec": head + tc.ops}
			if tc.file != "" {
				body["file"] = tc.file
			}
			st, err := e.do("POST", "/v1/jobs", body, &ej)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range ej.Fields {
				got = append(got, fmt.Sprintf("%d %s: %s", f.Line, f.Field, f.Msg))
				if f.File != tc.file {
					t.Errorf("error %q names file %q, want %q", f.Msg, f.File, tc.file)
				}
			}
			if st != 400 || len(got) != len(tc.want) {
				t.Fatalf("%d %q with %d errors, want 400 with %d:\n%s", st, ej.Error, len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("error %d:\n%s\nwant it to start with\n%s", i, got[i], tc.want[i])
				}
			}
		})
	}
	var list struct{ Jobs []jobJSON }
	if st, err := e.do("GET", "/v1/jobs", nil, &list); err != nil || st != 200 || len(list.Jobs) != 0 {
		t.Errorf("jobs after refused submissions: %d %v %+v, want none", st, err, list.Jobs)
	}
}
