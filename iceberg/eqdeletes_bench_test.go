package iceberg_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/iceberg/icebergtest"
)

// BenchmarkEqualityDeleted measures turning equality deletes into
// positions: one data file of 1 Mi rows, 16 Ki deleted ids, against
// decoding the file's id column alone (the least any matching reads).
//
//	go test ./iceberg -run '^$' -bench EqualityDeleted -benchtime 10x
func BenchmarkEqualityDeleted(b *testing.B) {
	const n = 1 << 20
	tab, err := icebergtest.New(filepath.Join(b.TempDir(), "t"), icebergtest.Layout{RowGroupRows: 128 << 10})
	if err != nil {
		b.Fatal(err)
	}
	rows := make([]icebergtest.Row, n)
	for i := range rows {
		rows[i] = icebergtest.Row{ID: int64(i) * 7919 % n, Part: "a", Key: int64(i % 1000), Score: float64(i)}
	}
	if _, _, err := tab.Append(rows); err != nil {
		b.Fatal(err)
	}
	del := make([]int64, 16<<10)
	for i := range del {
		del[i] = int64(i) * 61
	}
	_, meta, err := tab.DeleteEquality("a", "id", del, 0)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	sc, err := iceberg.Opener{}.Scan(ctx, "iceberg:"+meta)
	if err != nil {
		b.Fatal(err)
	}
	path := strings.TrimPrefix(tab.DataFiles()[0], "file://")
	b.Run("decode id alone", func(b *testing.B) {
		for b.Loop() {
			plan, err := decode.PlanFiles(ctx, []string{path}, decode.PlanOptions{Columns: []string{"id"}})
			if err != nil {
				b.Fatal(err)
			}
			dec := plan.NewDecoder()
			var bt column.Batch
			for _, u := range plan.Units {
				if err := dec.Decode(ctx, u, &bt); err != nil {
					b.Fatal(err)
				}
			}
			dec.Close()
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("equality deletes", func(b *testing.B) {
		for b.Loop() {
			sc, err := iceberg.Opener{}.Scan(ctx, "iceberg:"+meta) // a fresh scan: its delete rows are read again
			if err != nil {
				b.Fatal(err)
			}
			got, err := iceberg.EqualityDeleted(ctx, nil, []iceberg.Input{{Scan: sc}}, []string{path})
			if err != nil || len(got[path]) != len(del) {
				b.Fatalf("%d deleted, %v", len(got[path]), err)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	_ = sc
}
