package engine

import (
	"context"
	"fmt"

	"github.com/lastmile/lastmile/shm"
)

// Stager sees every packed slot of a run just before it is published:
// the daemon's device staging (docs/gpu.md, "device") copies the slot to
// its rank's GPU there, and may change the ring's announcement
// (shm.Producer.Announce), which the ring format requires before the
// publish the change concerns. Stage is called from the one goroutine
// that publishes, in publish order; the slot's bytes are final (Used) but
// its header is written by Publish, after Stage.
//
// An error from Stage fails the run. A stager that can go on without its
// copy (device staging falling back to host staging) handles the failure
// itself, withdraws its announcement and returns nil.
type Stager interface {
	Stage(ctx context.Context, rank int, ring *shm.Producer, s *shm.Slot) error
}

// stagedWriter is a ring whose Publish runs the stager first.
type stagedWriter struct {
	*shm.Producer
	ctx   context.Context
	rank  int
	stage Stager
}

func (w stagedWriter) Publish(s *shm.Slot) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if err := w.stage.Stage(w.ctx, w.rank, w.Producer, s); err != nil {
		return fmt.Errorf("ring %q: stage batch %d: %w", w.Name(), s.Seq(), err)
	}
	return w.Producer.Publish(s)
}

// writersFor returns the batcher's rings, staged when st is not nil.
func writersFor(ctx context.Context, rings []*shm.Producer, st Stager) []slotWriter {
	w := make([]slotWriter, len(rings))
	for i, r := range rings {
		if st == nil {
			w[i] = r
		} else {
			w[i] = stagedWriter{Producer: r, ctx: ctx, rank: i, stage: st}
		}
	}
	return w
}
