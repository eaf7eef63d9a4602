package decode

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/parquet-go/parquet-go/format"
)

// FuzzDeclaredCounts sets a footer's declared counts (a row group's and
// the file's num_rows, one column chunk's num_values and sizes) of a real
// file to fuzzed values, keeping every page byte, then plans and decodes
// it. FuzzPlanFooter mutates the footer's bytes, which seldom gives
// counts that still parse; here they always do. Besides ending in a plan
// or an error (planAndDecode), planning and decoding must not allocate
// beyond what the file's bytes justify: a user names the file, and
// lastmiled is shared (docs/decode.md, "Declared counts are held to the
// bytes").
func FuzzDeclaredCounts(f *testing.F) {
	dir := f.TempDir()
	seeds := []string{filepath.Join(dir, "v1.parquet"), filepath.Join(dir, "v2.parquet")}
	writeFile(f, seeds[0], fileSpec{rows: 300, codec: "snappy", pageVersion: 1, pageBytes: 1024})
	writeFile(f, seeds[1], fileSpec{rows: 300, rowGroupRows: 120, codec: "none", pageVersion: 2, pageBytes: 1024})
	for i := range seeds {
		f.Add(uint8(i), int64(300), int64(300), uint8(0), int64(-1), int64(-1))
		f.Add(uint8(i), int64(1)<<40, int64(1)<<40, uint8(3), int64(1)<<30, int64(-1))
		f.Add(uint8(i), int64(120), int64(1)<<62, uint8(1), int64(-1), int64(1)<<20)
		f.Add(uint8(i), int64(-5), int64(0), uint8(2), int64(0), int64(7))
	}
	path := filepath.Join(dir, "fuzz.parquet")
	f.Fuzz(func(t *testing.T, seed uint8, rows, values int64, col uint8, uncompressed, compressed int64) {
		b, err := os.ReadFile(seeds[int(seed)%len(seeds)])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		rewriteFooter(t, path, func(md *format.FileMetaData) {
			md.NumRows = rows
			g := &md.RowGroups[0]
			g.NumRows = rows
			c := g.Columns[int(col)%len(g.Columns)].MetaData
			c.NumValues = values
			if uncompressed >= 0 {
				c.TotalUncompressedSize = uncompressed
			}
			if compressed >= 0 {
				c.TotalCompressedSize = compressed
			}
		})
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		planAndDecode(t, path)
		runtime.ReadMemStats(&m1)
		// planAndDecode plans and decodes the file four ways; each may
		// hold a few buffers of eight times the stored bytes (storedBound)
		// and its fixed costs.
		if got, limit := m1.TotalAlloc-m0.TotalAlloc, uint64(64<<20+4*64*st.Size()); got > limit {
			t.Fatalf("a %d-byte file claiming %d rows (%d values in column %d, sizes %d/%d) made the planner and decoder allocate %d MiB",
				st.Size(), rows, values, col, uncompressed, compressed, got>>20)
		}
	})
}
