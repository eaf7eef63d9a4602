package engine_test

import (
	"errors"
	"testing"

	"github.com/lastmile/lastmile/engine"
)

// Options.ArenaClaim learns the unit arena's id (before its file exists:
// TestCreateArenaClaim), where a daemon records it so that it can remove
// the arena even if it dies before Ready; a claim that fails leaves the
// run copying, with every batch the same.
func TestArenaClaimedBeforeCreated(t *testing.T) {
	const src = `
inputs: [DATA]
columns: [row_id, seq_0, dense_0]
batch: {size: 300}
world_size: 2
epochs: 1
seed: 9
decode: {workers: 2}
ring: {dir: RINGDIR, name: c, slots: 3, arena: true}
`
	want := func() []digested {
		_, res := runDigested(t, src)
		return res
	}()
	cases := []struct {
		name  string
		err   error
		arena bool // the run decodes into an arena
	}{
		{"recorded", nil, true},
		{"the record fails", errors.New("state store full"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var claimed []uint64
			st, res, _, err := runReading(t, src, func(o *engine.Options) {
				o.Remove = true
				o.ArenaClaim = func(id uint64) error {
					claimed = append(claimed, id)
					return c.err
				}
			}, digestRing)
			if err != nil {
				t.Fatal(err)
			}
			if len(claimed) != 1 {
				t.Fatalf("claimed %v, want one arena id", claimed)
			}
			if got := st.ArenaUnits > 0; got != c.arena {
				t.Errorf("%d units into the arena, want an arena: %v", st.ArenaUnits, c.arena)
			}
			for r := range want {
				if len(res[r].batches) != len(want[r].batches) {
					t.Fatalf("rank %d: %d batches, want %d", r, len(res[r].batches), len(want[r].batches))
				}
				for i := range want[r].batches {
					if res[r].batches[i] != want[r].batches[i] {
						t.Fatalf("rank %d batch %d differs", r, i)
					}
				}
			}
		})
	}
}
