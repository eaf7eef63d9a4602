package ops_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/ops"
	"github.com/lastmile/lastmile/spec"
)

// TestDocsExamples parses every YAML example of docs/pipeline.md as a job
// spec, so the documentation cannot drift from what the parser accepts.
func TestDocsExamples(t *testing.T) {
	doc, err := os.ReadFile("../docs/pipeline.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(doc), "```yaml\n")[1:]
	if len(blocks) < 9 {
		t.Fatalf("%d yaml examples; want one per op at least", len(blocks))
	}
	for i, b := range blocks {
		src := b[:strings.Index(b, "```")]
		if !strings.Contains(src, "inputs:") {
			src = "inputs: [x]\nbatch: {size: 8}\n" + src
		}
		j, err := spec.Parse("pipeline.md", []byte(src))
		if err != nil {
			t.Errorf("example %d:\n%s\n%v", i, src, err)
			continue
		}
		if strings.Contains(src, "join:") {
			continue // needs its side tables
		}
		if _, err := ops.Compile(context.Background(), j, docSchema, ops.Env{}); err != nil {
			t.Errorf("example %d:\n%s\n%v", i, src, err)
		}
	}
}

// docSchema has the columns the examples read.
var docSchema = func() []decode.Field {
	var fs []decode.Field
	add := func(kind column.Kind, dt column.DType, nullable bool, names ...string) {
		for _, n := range names {
			fs = append(fs, decode.Field{Name: n, Kind: kind, DType: dt, Nullable: nullable})
		}
	}
	add(column.Fixed, column.Int64, false, "row_id", "user_id", "item_id", "cat_0")
	add(column.Fixed, column.Int32, false, "label")
	add(column.Fixed, column.Float32, false, "dense_0", "dense_1", "dense_2", "dense_3", "price", "score")
	add(column.Fixed, column.Int64, true, "age", "cat_opt")
	add(column.Fixed, column.Float32, true, "dense_opt")
	add(column.Bytes, column.Uint8, false, "query", "country")
	add(column.Bytes, column.Uint8, true, "query_opt")
	add(column.List, column.Int64, false, "seq_0", "seq_1", "clicks")
	return fs
}()
