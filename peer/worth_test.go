package peer

import (
	"testing"
	"time"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
)

// TestWorth: a unit spills only when receiving its expected output costs
// less than MaxCostRatio of computing it here, at the larger of the
// configured and the measured receive cost; until both sides have been
// measured, it spills.
func TestWorth(t *testing.T) {
	u := decode.Unit{Rows: 1e6}
	cases := []struct {
		name      string
		outPerRow float64 // output bytes per input row, learned from spilled units
		localRow  float64 // seconds per row here
		recvCPU   time.Duration
		recvBytes int64
		want      bool
	}{
		{"nothing measured yet", 0, 0, 0, 0, true},
		{"only the output measured", 150, 0, 0, 0, true},
		// 150 B/row × 1e6 rows = 0.15 GB × 1.5 s/GB = 0.225 s to receive,
		// against 30 s to compute: spill.
		{"small output, costly compute", 150, 30e-6, 0, 0, true},
		// 1 GB of output × 1.5 s/GB = 1.5 s against 1 s × 0.8: keep.
		{"output as large as its cost", 1000, 1e-6, 0, 0, false},
		// The configured 1.5 s/GB passes; measured 3 s/GB does not:
		// 0.15 GB × 3 = 0.45 s against 0.5 s × 0.8 = 0.4 s.
		{"measured receive costlier than configured", 150, 0.5e-6, 300 * time.Millisecond, 1e8, false},
		{"the same unit at the configured cost", 150, 0.5e-6, 0, 0, true},
		// A measured cost below the configured one does not lower it.
		{"measured cheaper than configured", 1000, 1e-6, 10 * time.Millisecond, 1e9, false},
		// Under a tenth of a GB received, the measurement is not used.
		{"too little received to tell", 150, 0.5e-6, 300 * time.Millisecond, 1e7, true},
	}
	for _, c := range cases {
		s := &Spiller{cfg: SpillerConfig{RecvSecondsPerGB: 1.5, MaxCostRatio: 0.8}}
		s.outRow.Store(float64bits(c.outPerRow))
		s.stats.RecvCPUNanos.Store(int64(c.recvCPU))
		s.stats.Bytes.Store(c.recvBytes)
		if got := s.worth(u, engine.Load{SecondsPerRow: c.localRow}); got != c.want {
			t.Errorf("%s: worth = %v, want %v", c.name, got, c.want)
		}
	}
}
