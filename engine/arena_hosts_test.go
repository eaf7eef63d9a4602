package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

// One host's share of a world with the unit arena gives each of its
// ranks the same batches, byte for byte, as without it, and leaves no
// file; the arena file it creates is the size its footprint
// (ForRanks(local)) counts, header page and rounding included.
func TestArenaHostsByteIdentical(t *testing.T) {
	const job = `
inputs: [DATA]
batch: {size: @SIZE@, last: @LAST@}
world_size: @WORLD@
epochs: 2
seed: 5
shuffle: {units: true@BUF@}
decode: {workers: 2}
ring: {dir: RINGDIR, name: a, slots: 2ARENA}
`
	abs, _ := filepath.Abs("../testdata/small")
	for _, tc := range []struct {
		name               string
		hosts, world, size int
		last, buf          string
	}{
		{"2x2 drop", 2, 4, 200, "drop", ""},
		{"3x1 pad", 3, 3, 250, "pad", ""},
		{"2x3 pad", 2, 6, 100, "pad", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.NewReplacer("@SIZE@", fmt.Sprint(tc.size), "@LAST@", tc.last, "@WORLD@", fmt.Sprint(tc.world), "@BUF@", tc.buf).Replace(job)
			for h := range tc.hosts {
				hosts := engine.Hosts{Count: tc.hosts, Index: h}
				local := tc.world / tc.hosts
				run := func(s string, arenaSize *int64) (engine.Stats, []digested) {
					var once sync.Once
					st, res, dir, err := runReading(t, s, func(o *engine.Options) { o.Remove = true; o.Hosts = hosts },
						func(ctx context.Context, dir, name string) digested {
							once.Do(func() {
								m, _ := filepath.Glob(filepath.Join(dir, "arena+*"))
								for _, f := range m {
									if fi, err := os.Stat(f); err == nil && arenaSize != nil {
										*arenaSize += fi.Size()
									}
								}
							})
							return digestRing(ctx, dir, name)
						})
					if err != nil {
						t.Fatalf("host %d: %v", h, err)
					}
					for r, d := range res {
						if d.err != nil {
							t.Fatalf("host %d rank %d: %v", h, r, d.err)
						}
					}
					if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
						t.Errorf("files left: %v", left)
					}
					return st, res
				}
				_, want := run(strings.ReplaceAll(src, "ARENA", ""), nil)
				var size int64
				st, got := run(strings.ReplaceAll(src, "ARENA", ", arena: true"), &size)
				for r := range want {
					if !slices.Equal(got[r].batches, want[r].batches) {
						t.Fatalf("host %d ring %d: %d batches with the arena, %d without; %d differ", h, r, len(got[r].batches), len(want[r].batches), differing(got[r].batches, want[r].batches))
					}
				}
				if st.ArenaUnits == 0 {
					t.Errorf("host %d: no unit decoded into the arena", h)
				}
				// The footprint of this host's share.
				j, err := spec.Parse("t.yaml", []byte(strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(src, "ARENA", ", arena: true"), "DATA", abs), "RINGDIR", t.TempDir())))
				if err != nil {
					t.Fatal(err)
				}
				fp, err := engine.EstimateFootprint(context.Background(), j, nil)
				if err != nil {
					t.Fatal(err)
				}
				if fr := fp.ForRanks(local); size == 0 || size != fr.ArenaBytes {
					t.Errorf("host %d: arena file %d bytes, footprint ForRanks(%d) counts %d", h, size, local, fr.ArenaBytes)
				} else {
					t.Logf("host %d: arena %d bytes, footprint %d (world %d); units %d fallbacks %d rank0 inArena %d",
						h, size, fr.ArenaBytes, fp.ArenaBytes, st.ArenaUnits, st.ArenaFallbacks, got[0].inArena)
				}
			}
		})
	}
}
