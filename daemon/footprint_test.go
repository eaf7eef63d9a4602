package daemon

import (
	"testing"

	"github.com/lastmile/lastmile/engine"
)

// An admission error names every part of a job's memory it has, and a
// footprint that footers inflated past any real job's is told apart.
func TestFootprintParts(t *testing.T) {
	cases := []struct {
		name        string
		fp          engine.Footprint
		want        string
		implausible bool
	}{
		{"rings and units", engine.Footprint{Rings: 2, Slots: 4, SlotSize: 2 << 20, InFlight: 4, UnitBytes: 64 << 20},
			"2 rings of 4 slots of 2MiB, 4 in-flight units of about 64MiB", false},
		{"every part", engine.Footprint{Rings: 1, Slots: 2, SlotSize: 1 << 20, ArenaBytes: 512 << 20, InFlight: 2, UnitBytes: 1 << 20,
			ShuffleBytes: 16 << 20, CacheBytes: 2 << 30, SideBytes: 10 << 20},
			"1 ring of 2 slots of 1MiB, a 512MiB unit arena (ring.arena), 2 in-flight units of about 1MiB, a 16MiB shuffle window, a 2GiB unit cache, 10MiB of join side tables", false},
		{"footers that claim too much", engine.Footprint{Rings: 1, Slots: 2, SlotSize: 1 << 20, InFlight: 65536, UnitBytes: 1 << 50},
			"1 ring of 2 slots of 1MiB, 65536 in-flight units of about 1024TiB", true},
		{"a part that wrapped", engine.Footprint{Rings: 1, Slots: 2, SlotSize: 1 << 20, SideBytes: -5},
			"1 ring of 2 slots of 1MiB", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := footprintParts(c.fp); got != c.want {
				t.Errorf("parts %q, want %q", got, c.want)
			}
			if got := c.fp.Implausible(); got != c.implausible {
				t.Errorf("implausible %v, want %v (%d bytes)", got, c.implausible, c.fp.Bytes())
			}
		})
	}
}
