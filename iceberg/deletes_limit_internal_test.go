package iceberg

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestDeletedRowsLimitOverflow: applyDeletes (deletes.go) checks
// the sum of the manifests' record counts of position delete files and
// deletion vectors against MaxDeletedRows, but the counts are the
// manifest writer's word and are summed in an int64 unchecked: four
// delete files each said to hold 2^62 rows sum to 0 (and a negative
// count cancels a large one), so the limit passes and each file is then
// read with readDeleteFile's own check (plan.Rows > d.rows) satisfied by
// its 2^62. A delete file of billions of RLE-encoded (file_path, pos)
// rows then fills File.Deleted (8 bytes a row, before Compact) without
// bound: the limit MaxDeletedRows exists to stop exactly that.
func TestDeletedRowsLimitOverflow(t *testing.T) {
	type posDelete struct {
		FilePath string `parquet:"file_path"`
		Pos      int64  `parquet:"pos"`
	}
	p := filepath.Join(t.TempDir(), "deletes.parquet")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[posDelete](f)
	if _, err := w.Write([]posDelete{{"/nowhere/data.parquet", 0}, {"/nowhere/data.parquet", 1}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, c := range []struct {
		name string
		rows []int64
	}{
		{"four counts of 2^62 wrap to 0", []int64{1 << 62, 1 << 62, 1 << 62, 1 << 62}},
		{"a negative count cancels a huge one", []int64{1 << 40, -(1 << 40)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Scan{Table: "t"}
			for _, r := range c.rows {
				s.deletes = append(s.deletes, deleteFile{path: p, rows: r})
			}
			err := s.applyDeletes(context.Background(), nil)
			t.Logf("applyDeletes: %v", err)
			if err == nil || !strings.Contains(err.Error(), "position deletes, more than") {
				t.Fatalf("delete files whose manifests claim %v rows passed the MaxDeletedRows check (err %v); want it refused", c.rows, err)
			}
		})
	}
}
