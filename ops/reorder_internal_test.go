package ops

import (
	"context"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/spec"
)

// TestReorderKeepsRows runs Select's drops in every order: the rows kept
// must not change.
func TestReorderKeepsRows(t *testing.T) {
	const n = 5000
	b := &column.Batch{Rows: n}
	for _, name := range []string{"id", "x"} {
		c := column.Column{Name: name, Kind: column.Fixed, DType: column.Int64, Width: 1, Len: n}
		for i := range n {
			v := int64(i)
			if name == "x" {
				v = int64(i*7919) % 1000
			}
			if name == "x" && i%50 == 0 {
				v = 0
			}
			c.Data = binary.LittleEndian.AppendUint64(c.Data, uint64(v))
		}
		if name == "x" {
			c.Valid = make([]byte, n)
			for i := range n {
				c.Valid[i] = byte(min(i%50, 1))
			}
		}
		b.Columns = append(b.Columns, c)
	}
	var fields []decode.Field
	for _, c := range b.Columns {
		fields = append(fields, decode.Field{Name: c.Name, Kind: c.Kind, DType: c.DType, Nullable: c.Valid != nil})
	}
	src := `version: 1
inputs: [x]
batch: {size: 8}
pipeline:
  - filter: "x < 700"
  - sample: {key: id, rates: [{when: "x < 100", rate: 0.5}, {rate: 0.3}]}
  - filter: "id % 3 != 0"
  - nulls: {policy: skip, columns: [x]}
`
	j, err := spec.Parse("j.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(context.Background(), j, fields, Env{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !p.reorderable() || len(p.selectSteps) != 4 {
		t.Fatalf("plan:\n%s", p)
	}
	st := p.NewState()
	st.order = nil // spec order
	want, err := st.Select(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	want = slices.Clone(want)
	perms := 0
	var permute func(k int, order []int)
	permute = func(k int, order []int) {
		if k == len(order) {
			st := p.NewState()
			st.order = slices.Clone(order)
			st.calls = 1 // no reordering during the call
			got, err := st.Select(b, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("order %v keeps %d rows, spec order %d", order, len(got), len(want))
			}
			perms++
			return
		}
		for i := k; i < len(order); i++ {
			order[k], order[i] = order[i], order[k]
			permute(k+1, order)
			order[k], order[i] = order[i], order[k]
		}
	}
	permute(0, slices.Clone(p.selectSteps))
	if perms != 24 {
		t.Errorf("%d orders tried", perms)
	}
	// And adaptively, over many calls.
	st = p.NewState()
	for range 100 {
		got, err := st.Select(b, nil)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("adaptive order %v: %d rows, err %v", st.order, len(got), err)
		}
	}
}

// TestMoves checks which ragged sequences take over their input column.
func TestMoves(t *testing.T) {
	fields := []decode.Field{
		{Name: "s", Kind: column.List, DType: column.Int64},
		{Name: "id", Kind: column.Fixed, DType: column.Int64},
	}
	cases := []struct {
		ops  string
		move bool
	}{
		{"  - sequence: {column: s, length: 0, max_length: 2}\n", true},
		{"  - sequence: {column: s, length: 0, max_length: 2, on_long: skip}\n", true},
		{"  - sequence: {column: s, length: 0, max_length: 2, on_long: error}\n", false},
		{"  - sequence: {column: s, length: 0, max_length: 2, output: t}\n", false},
		{"  - sequence: {column: s, length: 0, max_length: 2, output: t}\n  - map: {n: \"len(s)\"}\n  - drop: [s]\n", false},
		{"  - map: {n: \"len(s)\"}\n  - sequence: {column: s, length: 0, max_length: 2}\n", true},
		{"  - cast: {s: int32}\n  - sequence: {column: s, length: 0, max_length: 2}\n", false},
	}
	for _, tc := range cases {
		j, err := spec.Parse("j.yaml", []byte("version: 1\ninputs: [x]\nbatch: {size: 8}\npipeline:\n"+tc.ops))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Compile(context.Background(), j, fields, Env{})
		if err != nil {
			t.Fatal(err)
		}
		got := false
		for _, s := range p.steps {
			if sh, ok := s.(*seqShape); ok {
				got = sh.move
			}
		}
		if got != tc.move {
			t.Errorf("%s: move %v, want %v", tc.ops, got, tc.move)
		}
	}
}
