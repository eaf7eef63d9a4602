package decode

import (
	"context"
	"os"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	arrowpq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/lastmile/lastmile/column"
)

// planPaths plans inputs with opts, failing the test on error.
func planPaths(t testing.TB, opts PlanOptions, inputs ...string) *Plan {
	t.Helper()
	plan, err := PlanFiles(context.Background(), inputs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// writeArrow writes rec to path with arrow-go's Parquet writer.
func writeArrow(t testing.TB, path string, rec arrow.RecordBatch, props *arrowpq.WriterProperties, aprops pqarrow.ArrowWriterProperties) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(rec.Schema(), f, props, aprops)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil { // closes f
		t.Fatal(err)
	}
}

// eachUnit decodes plan's units in order and calls check with each batch
// and the plan-wide index of its first row; it returns the rows decoded.
func eachUnit(t testing.TB, plan *Plan, check func(u Unit, b *column.Batch, first int)) int {
	t.Helper()
	d := NewDecoder(plan.Fields)
	defer d.Close()
	var b column.Batch
	row := 0
	for _, u := range plan.Units {
		if err := d.Decode(context.Background(), u, &b); err != nil {
			t.Fatal(err)
		}
		check(u, &b, row)
		row += b.Rows
	}
	return row
}
