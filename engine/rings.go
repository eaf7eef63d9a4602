package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// closeRings ends a finished run's rings: with linger, after the
// trainers have drained them (the wait counted in st.Drain).
func closeRings(ctx context.Context, rings []*shm.Producer, linger bool, st *Stats, log *slog.Logger) {
	if linger {
		t := time.Now()
		for _, r := range rings {
			if err := r.WaitDrained(ctx); err != nil {
				break
			}
		}
		st.Drain = time.Since(t)
	}
	msg := fmt.Sprintf("done: %d epochs, %d batches", st.Epochs, st.Batches)
	for _, r := range rings {
		if err := r.CloseWith(msg); err != nil {
			log.Warn("close ring", "ring", r.Name(), "err", err)
		}
	}
}

// failRings tells the trainers on rings that the run failed with err,
// and closes the rings.
func failRings(rings []*shm.Producer, err error) {
	msg := err.Error()
	if errors.Is(err, context.Canceled) {
		msg = "job canceled"
	}
	for _, r := range rings {
		r.Fail(msg)
		r.Close()
	}
}

func createRings(job *spec.Job, plan *decode.Plan, fields []packField, local, base int, owner uint32,
	place func(rank int, create func() error) error, arena *shm.Arena) ([]*shm.Producer, error) {
	if place == nil {
		place = func(_ int, create func() error) error { return create() }
	}
	rf := make([]shm.Field, len(fields))
	for i, f := range fields {
		rf[i] = f.ringField()
	}
	size := int64(job.Ring.SlotSize)
	if size == 0 {
		size = slotSize(plan, fields, job.Batch.Size)
	}
	mode, _ := job.Ring.FileMode()
	rings := make([]*shm.Producer, 0, local)
	for r := 0; r < local; r++ {
		var p *shm.Producer
		err := place(r, func() (err error) {
			p, err = shm.Take(shm.Config{ // Take: Create, or adopt a ring this process claimed (engine/adopt.go)
				Dir: job.Ring.Dir, Name: job.RingName(base + r), Slots: job.Ring.Slots,
				SlotSize: size, Mode: mode, Fields: rf, Owner: owner, Arena: arena,
			})
			return err
		})
		if err == nil && p == nil {
			panic("BUG: Options.PlaceRing returned without creating the ring")
		}
		if err != nil {
			for _, q := range rings {
				q.Fail("job failed to start: " + err.Error())
				q.Close()
				q.Remove()
				// The arena of a dead run's ring this one replaced: no ring
				// of the job is left to name it (settleArenas never runs).
				if id, uid := q.ReplacedArena(); id != 0 {
					shm.RemoveArena(job.Ring.Dir, id, uid)
				}
			}
			return nil, fmt.Errorf("job %q: %w", job.Name, err)
		}
		rings = append(rings, p)
	}
	return rings, nil
}
