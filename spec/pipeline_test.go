package spec_test

import (
	"strings"
	"testing"

	"github.com/lastmile/lastmile/spec"
)

func TestExamplePipelineParses(t *testing.T) {
	j, err := spec.ReadFile("../examples/ctr-8rank.yaml")
	if err != nil {
		t.Fatal(err)
	}
	kinds := []string{}
	for _, op := range j.Pipeline {
		kinds = append(kinds, op.Kind)
	}
	if got := strings.Join(kinds, ","); got != "join,sample,map,sequence,stack,jagged,select" {
		t.Errorf("ops %s", got)
	}
	if j.WorldSize != 8 || !j.Shuffle.Units || j.Shuffle.Buffer != 16384 {
		t.Errorf("job %+v", j)
	}
	jn := j.Pipeline[0].Join
	if jn.TableKey != "user_id" || jn.MaxMemory != 256<<20 || !strings.HasSuffix(jn.Table, "examples/../out/ctr-spam.parquet") {
		t.Errorf("join %+v", jn)
	}
	m := j.Pipeline[2].Map
	if len(m) != 6 || m[0].Name != "label_f" || m[0].Value != "cast(label, float32)" {
		t.Errorf("map %+v", m)
	}
	s := j.Pipeline[3].Sequence
	if s.Length != 64 || s.Truncate != "left" || s.PadSide != "right" || s.OnLong != "truncate" || s.Output != "seq_0" {
		t.Errorf("sequence %+v", s)
	}
	if st := j.Pipeline[4].Stack; st.Output != "dense" || len(st.Columns) != 8 || st.DType != "float32" || st.Nulls != "error" {
		t.Errorf("stack %+v", st)
	}
	g := j.Pipeline[5].Jagged
	if g.Output != "sparse" || len(g.Keys) != 8 || g.Keys[6].HashMod != 65536 || g.Keys[7] != (spec.JaggedKey{Column: "seq_1", Key: "history", MaxLength: 256, Truncate: "left", Line: g.Keys[7].Line}) {
		t.Errorf("jagged %+v", g)
	}
}

func TestPipelineErrors(t *testing.T) {
	base := "inputs: [a]\nbatch: {size: 8}\npipeline:\n"
	cases := []struct{ name, ops, want string }{
		{"unknown op", "  - frobnicate: 3\n", `4: pipeline[0]: unknown op "frobnicate"`},
		{"two keys", "  - {filter: a, map: {x: y}}\n", "4: pipeline[0]: want one op"},
		{"empty filter", "  - filter: \"\"\n", "pipeline[0].filter: want a boolean expression"},
		{"bad rate", "  - sample: {key: row_id, rates: [{rate: 1.5}]}\n", "pipeline[0].sample.rates[0].rate: want a rate in (0, 1], got 1.5"},
		{"default not last", "  - sample: {key: k, rates: [{rate: 0.5}, {when: x, rate: 0.1}]}\n", "only the last rule may omit when"},
		{"no key", "  - sample: {rates: [{rate: 0.5}]}\n", "pipeline[0].sample.key: required"},
		{"join kind", "  - join: {kind: outer, table: t, on: u}\n", `pipeline[0].join.kind: want semi, anti or left, got "outer"`},
		{"anti columns", "  - join: {kind: anti, table: t, on: u, columns: [x]}\n", "a anti join adds no columns"},
		{"seq side", "  - sequence: {column: s, length: 4, truncate: middle}\n", `pipeline[0].sequence.truncate: want left or right, got "middle"`},
		{"cast type", "  - cast: {x: float8}\n", `pipeline[0].cast.x: want int32, int64, float32, float64 or bfloat16, got "float8"`},
		{"nulls policy", "  - nulls: {policy: ignore}\n", `pipeline[0].nulls.policy: want error, skip or fill`},
		{"unknown op field", "  - join: {kind: anti, table: t, on: u, key: v}\n", "4: pipeline[0].join.key: unknown field"},
		{"map dup", "  - map:\n      a: x\n      a: y\n", "6: pipeline[0].map.a: given twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := spec.Parse("p.yaml", []byte(base+tc.ops))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}
