package engine

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/spec"
)

// TestEmptyUnitHasTheJobsColumns: a peer's unit whose pipeline keeps no
// row comes back with the job's columns, empty, whatever the reused batch
// held before (nothing, or another job's columns), so the requester takes
// it (checkOutput) instead of computing the unit again. (A review found
// such units refused and recomputed.)
func TestEmptyUnitHasTheJobsColumns(t *testing.T) {
	data, _ := filepath.Abs("../testdata/small")
	job, err := spec.Parse("empty.yaml", []byte(`version: 1
name: empty
inputs: [`+data+`]
batch: {size: 100}
ring: {dir: `+t.TempDir()+`}
pipeline:
  - filter: "row_id < 0"
  - sequence: {column: seq_0, length: 8}
`))
	if err != nil {
		t.Fatal(err)
	}
	up, err := NewUnitProcessor(context.Background(), job, decode.OSFS{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	u := up.Units()[0]
	stale := &column.Batch{Rows: 3, Columns: []column.Column{{Name: "other", Kind: column.Fixed, DType: column.Int64, Width: 1, Len: 3, Data: make([]byte, 24)}}}
	for _, c := range []struct {
		name string
		out  *column.Batch
	}{
		{"a fresh batch", &column.Batch{}},
		{"another job's batch", stale},
	} {
		if err := up.Compute(context.Background(), u, c.out); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.out.Rows != 0 {
			t.Fatalf("%s: %d rows kept by a filter that keeps none", c.name, c.out.Rows)
		}
		if err := checkOutput(c.out, up.Fields(), u); err != nil {
			t.Errorf("%s: the requester would refuse the empty unit: %v", c.name, err)
		}
	}
}
