package engine_test

import (
	"github.com/lastmile/lastmile/engine"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Arena against no arena, byte for byte, over shapes TestArenaByteIdentical
// does not cover.
func TestArenaByteIdenticalVariants(t *testing.T) {
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	part := t.TempDir()
	for i, f := range []string{"part-00000.parquet", "part-00001.parquet", "part-00002.parquet"} {
		d := filepath.Join(part, "p="+string(rune('1'+i)))
		os.MkdirAll(d, 0o755)
		b, _ := os.ReadFile(abs("../testdata/small/" + f))
		os.WriteFile(filepath.Join(d, f), b, 0o644)
	}
	base := `
inputs: [@IN@]
batch: {size: @SIZE@, last: @LAST@}
world_size: @WORLD@
epochs: @EP@
seed: 3
decode: {workers: 2@DEC@}
ring: {dir: RINGDIR, name: a, slots: 3ARENA}
@EXTRA@
`
	cases := []struct{ name, in, size, last, world, dec, extra string }{
		{"hashed", abs("../testdata/small"), "200", "drop", "1", "", "hashed: {query: 1000, query_opt: 97}"},
		{"keep333", abs("../testdata/small"), "333", "keep", "1", "", ""},
		{"size1", abs("../testdata/none"), "1", "drop", "1", "", "columns: [row_id, seq_0]\nshuffle: {units: true}"},
		{"wholeunit", abs("../testdata/small"), "2048", "pad", "1", "", ""},
		{"pad-world3", abs("../testdata/small"), "700", "pad", "3", "", ""},
		{"opt-only", abs("../testdata/small"), "100", "drop", "2", "", "columns: [seq_opt, dense_opt, cat_opt, query_opt]"},
		{"zstd-v2", abs("../testdata/zstd"), "250", "keep", "1", "", ""},
		{"split-units", abs("../testdata/small"), "100", "drop", "1", ", max_unit_rows: 500", ""},
		{"partitions", part, "300", "drop", "1", "", "partitions: {p: int64}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ep := "2"
			if tc.size == "1" {
				ep = "1" // 2,000 batches of one row are enough
			}
			src := strings.NewReplacer("@EP@", ep, "@IN@", tc.in, "@SIZE@", tc.size, "@LAST@", tc.last, "@WORLD@", tc.world, "@DEC@", tc.dec, "@EXTRA@", tc.extra).Replace(base)
			_, want := runDigestedAt(t, strings.ReplaceAll(src, "ARENA", ""))
			st, got := runDigestedAt(t, strings.ReplaceAll(src, "ARENA", ", arena: true"))
			for r := range want {
				if !slices.Equal(got[r].batches, want[r].batches) {
					t.Fatalf("rank %d: %d batches with the arena, %d without; %d differ", r, len(got[r].batches), len(want[r].batches), differing(got[r].batches, want[r].batches))
				}
			}
			t.Logf("arena units %d fallbacks %d; rank0 inArena %d", st.ArenaUnits, st.ArenaFallbacks, got[0].inArena)
		})
	}
}

func runDigestedAt(t *testing.T, src string) (engine.Stats, []digested) {
	t.Helper()
	return runDigested(t, src)
}
