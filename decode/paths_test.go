package decode

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/lastmile/lastmile/column"
)

// TestPathsAgree checks that the comparison paths produce batches
// identical to the production decoder's, which TestDecodeFormats checks
// against the values written.
func TestPathsAgree(t *testing.T) {
	for _, version := range []int{1, 2} {
		for _, codec := range []string{"none", "snappy", "zstd"} {
			t.Run(fmt.Sprintf("v%d/%s", version, codec), func(t *testing.T) {
				t.Parallel()
				p := filepath.Join(t.TempDir(), "f.parquet")
				writeFile(t, p, fileSpec{rows: 1500, rowGroupRows: 1000, codec: codec, pageVersion: version, pageBytes: 2048})
				plan, err := PlanFiles(context.Background(), []string{p}, PlanOptions{MaxUnitRows: 600})
				if err != nil {
					t.Fatal(err)
				}
				comparePaths(t, plan)
			})
		}
	}
}

func comparePaths(t *testing.T, plan *Plan) {
	t.Helper()
	decs := make([]UnitDecoder, len(Paths))
	for i, p := range Paths {
		d, err := NewUnitDecoder(p, plan.Fields)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		decs[i] = d
	}
	batches := make([]column.Batch, len(Paths))
	for _, u := range plan.Units {
		for i, d := range decs {
			if err := d.Decode(context.Background(), u, &batches[i]); err != nil {
				t.Fatalf("%v: %v", Paths[i], err)
			}
		}
		for i := 1; i < len(Paths); i++ {
			if batches[i].Rows != batches[0].Rows {
				t.Fatalf("%v: %d rows, own %d", Paths[i], batches[i].Rows, batches[0].Rows)
			}
			for c := range batches[0].Columns {
				if diff := diffColumn(&batches[i].Columns[c], &batches[0].Columns[c]); diff != "" {
					t.Fatalf("unit %d: %v vs own: %s", u.Seq, Paths[i], diff)
				}
			}
		}
	}
}
