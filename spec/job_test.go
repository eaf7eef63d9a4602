package spec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/spec"
)

const minimal = `
version: 1
name: demo
inputs: [data/]
batch: {size: 1024}
`

func TestParseDefaults(t *testing.T) {
	j, err := spec.Parse("jobs/demo.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if j.Ring.Name != "lastmile.demo" || j.Ring.Slots != 4 || j.Ring.Mode != "0600" {
		t.Errorf("ring defaults: %+v", j.Ring)
	}
	if j.WorldSize != 1 || j.EpochCount() != 1 || j.Batch.Last != "drop" {
		t.Errorf("defaults: world %d epochs %d last %q", j.WorldSize, j.EpochCount(), j.Batch.Last)
	}
	if j.Inputs[0] != "jobs/data/" {
		t.Errorf("relative input not anchored at the spec's directory: %q", j.Inputs[0])
	}
	if j.RingName(0) != "lastmile.demo" {
		t.Errorf("ring name %q", j.RingName(0))
	}
}

func TestParseJSON(t *testing.T) {
	j, err := spec.Parse("", []byte(`{"version": 1, "name": "x", "inputs": ["/d"], "batch": {"size": 8, "last": "pad"},
		"world_size": 8, "epochs": 0, "ring": {"slot_size": "64MiB", "slots": 2}}`))
	if err != nil {
		t.Fatal(err)
	}
	if j.WorldSize != 8 || j.EpochCount() != 0 || j.Ring.SlotSize != 64<<20 || j.RingName(3) != "lastmile.x.r3" {
		t.Errorf("got %+v", j)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, src string
		want      []string // substrings, each in some error line
	}{
		{"unknown field", minimal + "batchsize: 3\n", []string{`6: batchsize: unknown field (allowed: version, name, inputs`}},
		{"unknown nested", minimal + "ring: {slotz: 3}\n", []string{`6: ring.slotz: unknown field (allowed: name, slots, slot_size, dir, mode, arena); did you mean "slots"?`}},
		{"missing inputs and batch", "version: 1\n", []string{"inputs: required", "batch.size: required"}},
		{"wrong type", "inputs: [a]\nbatch: {size: many}\n", []string{`2: batch.size: want a whole number, got "many"`}},
		{"bad version", "version: 7\ninputs: [a]\nbatch: {size: 1}\n", []string{"1: version: unsupported spec version 7"}},
		{"bad last", "inputs: [a]\nbatch: {size: 1, last: sometimes}\n", []string{`2: batch.last: want drop, pad or keep, got "sometimes"`}},
		{"keep with ranks", "inputs: [a]\nworld_size: 2\nbatch: {size: 1, last: keep}\n", []string{"hangs DDP"}},
		{"bad size", "inputs: [a]\nbatch: {size: 1}\nring: {slot_size: lots}\n", []string{`3: ring.slot_size: want a size such as 4096, 512KiB or 64MiB, got "lots"`}},
		{"tiny slot", "inputs: [a]\nbatch: {size: 1}\nring: {slot_size: 100}\n", []string{"ring.slot_size: want 0 (automatic) or 4KiB to 1TiB"}},
		{"bad mode", "inputs: [a]\nbatch: {size: 1}\nring: {mode: \"0400\"}\n", []string{"ring.mode: mode \"0400\" must let the owner"}},
		{"dup column", "inputs: [a]\nbatch: {size: 1}\ncolumns: [a, b, a]\n", []string{`3: columns[2]: column "a" listed twice`}},
		{"given twice", "inputs: [a]\nbatch: {size: 1}\nbatch: {size: 2}\n", []string{"3: batch: given twice"}},
		{"not a mapping", "- a\n- b\n", []string{"want a mapping, got a list"}},
		{"bad yaml", "inputs: [a\n", []string{"not valid YAML or JSON"}},
		{"empty", "", []string{"empty spec"}},
		{"inflight below workers", "inputs: [a]\nbatch: {size: 1}\ndecode: {workers: 4, inflight: 2}\n", []string{"decode.inflight: must be at least decode.workers (4)"}},
		{"negative epochs", "inputs: [a]\nbatch: {size: 1}\nepochs: -1\n", []string{"epochs: want 0 (without end) or more"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := spec.Parse("job.yaml", []byte(tc.src))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			var fe *spec.FieldError
			if !errors.As(err, &fe) {
				t.Errorf("error %T does not unwrap to *FieldError", err)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	f := func(in string, want spec.Size, ok bool) {
		t.Helper()
		got, err := spec.ParseSize(in)
		if (err == nil) != ok || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, ok=%v", in, got, err, want, ok)
		}
	}
	f("4096", 4096, true)
	f("64MiB", 64<<20, true)
	f("1.5GiB", 3<<29, true)
	f("2MB", 2e6, true)
	f("10B", 10, true)
	f("-1", 0, false)
	f("MiB", 0, false)
	f("1e30TiB", 0, false)
	if s := spec.Size(64 << 20).String(); s != "64MiB" {
		t.Errorf("String = %q", s)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte(`{"inputs": ["a"], "batch": {"size": 3}, "ring": {"slot_size": "1GiB"}}`))
	f.Add([]byte("inputs: &a [x]\nbatch: *a\n"))
	f.Add([]byte("inputs: [x]\nbatch: {size: 8}\npipeline:\n  - stack: {output: d, columns: [a, b], dtype: bfloat16, nulls: fill, fill: 1}\n" +
		"  - jagged: {output: s, keys: [a, {column: b, key: k, max_length: 3, truncate: right, hash_mod: 7}, &k {column: c}, *k]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := spec.Parse("fuzz.yaml", data)
		if err == nil && (j.Batch.Size < 1 || len(j.Inputs) == 0 || j.WorldSize < 1) {
			t.Fatalf("accepted an invalid spec: %+v", j)
		}
		if err != nil {
			return
		}
		for _, op := range j.Pipeline {
			if g := op.Jagged; g != nil {
				keys := map[string]bool{}
				for _, k := range g.Keys {
					if k.Column == "" || k.Key == "" || keys[k.Key] || k.MaxLength < 0 || k.HashMod < 0 {
						t.Fatalf("accepted jagged keys %+v", g.Keys)
					}
					keys[k.Key] = true
				}
			}
			if s := op.Stack; s != nil && (s.Output == "" || len(s.Columns) == 0 || s.Nulls == "" || s.DType == "") {
				t.Fatalf("accepted stack %+v", s)
			}
		}
	})
}
