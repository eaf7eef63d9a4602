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
		for _, codec := range []string{"none", "snappy", "zstd", "gzip", "lz4", "brotli"} {
			t.Run(fmt.Sprintf("v%d/%s", version, codec), func(t *testing.T) {
				t.Parallel()
				p := filepath.Join(t.TempDir(), "f.parquet")
				writeFile(t, p, fileSpec{rows: 1500, rowGroupRows: 1000, codec: codec, pageVersion: version, pageBytes: 2048})
				plan, err := PlanFiles(context.Background(), []string{p}, PlanOptions{MaxUnitRows: 600})
				if err != nil {
					t.Fatal(err)
				}
				checkPlan(t, plan, func(u Unit) int64 { return u.Ordinal })
				if codec == "lz4" {
					// parquet-go v0.32 misreads the LZ4_RAW pages it writes
					// (garbage values, level errors); arrow and own agree.
					comparePaths(t, plan, PathOwn, PathArrow)
					return
				}
				comparePaths(t, plan)
			})
		}
	}
}

func comparePaths(t *testing.T, plan *Plan, only ...Path) {
	t.Helper()
	paths := Paths
	if only != nil {
		paths = only
	}
	decs := make([]UnitDecoder, len(paths))
	for i, p := range paths {
		d, err := NewUnitDecoder(p, plan.Fields)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		decs[i] = d
	}
	batches := make([]column.Batch, len(paths))
	for _, u := range plan.Units {
		for i, d := range decs {
			if err := d.Decode(context.Background(), u, &batches[i]); err != nil {
				t.Fatalf("%v: %v", paths[i], err)
			}
		}
		for i := 1; i < len(paths); i++ {
			if batches[i].Rows != batches[0].Rows {
				t.Fatalf("%v: %d rows, own %d", paths[i], batches[i].Rows, batches[0].Rows)
			}
			for c := range batches[0].Columns {
				if diff := diffColumn(&batches[i].Columns[c], &batches[0].Columns[c]); diff != "" {
					t.Fatalf("unit %d: %v vs own: %s", u.Seq, paths[i], diff)
				}
			}
		}
	}
}
