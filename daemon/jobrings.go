package daemon

import (
	"os"
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
	"golang.org/x/sys/unix"
)

// The job's rings from outside a run: failing them, their generations,
// removing them, and where their consumers stand.

// failRings ends every ring of the job with msg (state error), through a
// short-lived producer that adopts each ring still running. Rings that
// ended already are left as they are.
func (j *Job) failRings(msg string) {
	for r := 0; r < j.local; r++ {
		name := j.ringName(r)
		o, err := shm.Observe(j.spec.Ring.Dir, name)
		if err != nil {
			shm.Unclaim(j.spec.Ring.Dir, name)
			continue
		}
		hdr, info := o.Header(), o.Info()
		o.Close()
		if info.State != shm.StateRunning || info.Generation != j.generation(r) {
			shm.Unclaim(j.spec.Ring.Dir, name)
			continue
		}
		p, err := shm.Adopt(shm.Config{Dir: j.spec.Ring.Dir, Name: name, Slots: hdr.SlotCount,
			SlotSize: hdr.SlotSize, Fields: hdr.Fields, Owner: j.owner})
		if err != nil {
			j.log.Warn("end ring", "rank", r, "ring", name, "err", err)
			continue
		}
		if p.Generation() != hdr.Generation {
			// Not adoptable after all (it changed under us): do not leave
			// a fresh empty ring behind.
			p.Close()
			p.Remove()
			continue
		}
		p.Fail(msg)
	}
}

func (j *Job) generation(r int) uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	if r < len(j.ranks) {
		return j.ranks[r].Generation
	}
	return 0
}

// removeRings unlinks the job's ring files, each only if it is still the
// ring of this job (a later job of the same name may have replaced it). It
// does nothing to a job that is no longer terminal, or (ended not zero) no
// longer the one that ended at ended: a done job a trainer brought back to
// production (revive.go) after the caller looked, and that may even have
// ended again since, with new rings.
func (j *Job) removeRings(ended time.Time) {
	j.mu.Lock()
	if !j.state.Terminal() || !ended.IsZero() && !j.ended.Equal(ended) {
		j.mu.Unlock()
		return
	}
	ranks := append([]rankRec(nil), j.ranks...)
	arenas := j.arenas
	obs := j.obs
	j.obs = nil
	j.removed = true
	j.mu.Unlock()
	for _, o := range obs {
		if o != nil {
			o.Close()
		}
	}
	for r := range ranks {
		name := j.ringName(r)
		shm.Unclaim(j.spec.Ring.Dir, name)
		o, err := shm.Observe(j.spec.Ring.Dir, name)
		if err != nil {
			continue
		}
		info := o.Info()
		o.Close()
		if info.Generation != ranks[r].Generation || info.ProducerAlive {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(info.Path, &st) == nil && st.Dev == info.Dev && st.Ino == info.Ino {
			if err := os.Remove(info.Path); err != nil {
				j.log.Warn("remove ring", "rank", r, "ring", name, "err", err)
			}
		}
	}
	// The unit arenas the job's runs made (ring.arena), after the rings:
	// the ids are the daemon's own record's, never a ring header's.
	for _, id := range arenas {
		if _, err := shm.RemoveArena(j.spec.Ring.Dir, id, j.owner, uint32(os.Geteuid())); err != nil {
			j.log.Warn("remove unit arena", "arena", shm.ArenaName(id), "err", err)
		}
	}
	j.log.Info("rings removed")
	j.persist()
}

// releaseUnread removes the rings of a canceled job that no trainer
// reads: nobody will, and until they are removed they count against its
// owner's limits and memory.total (limits.go). A trainer that still
// reads one gets the batches published and then the cancel's message; the
// monitor removes the rings once it has detached (or read them to their
// end, or the grace period ran out).
func (j *Job) releaseUnread() {
	j.mu.Lock()
	st, removed, ended := j.state, j.removed, j.ended
	j.mu.Unlock()
	if st != Canceled || removed || j.consumerAttached() {
		return
	}
	j.log.Info("removing the rings of a canceled job no trainer reads")
	j.removeRings(ended)
}

// consumerAttached reports whether a trainer holds any of the job's
// current rings (of its generations).
func (j *Job) consumerAttached() bool {
	for r := 0; r < j.local; r++ {
		info, err := shm.Inspect(j.spec.Ring.Dir, j.ringName(r))
		if err == nil && info.Generation == j.generation(r) && info.ConsumerAttached {
			return true
		}
	}
	return false
}

// standing returns where rank r stands: the cursor of the next batch its
// consumer will get, from the ring's state, and whether it is known.
func standing(info shm.RingInfo, start engine.Cursor) (engine.Cursor, bool) {
	switch {
	case info.HasNext:
		return engine.RingCursor(info.Next), true
	case info.Head == info.Tail && info.HasLast:
		return engine.NextCursor(info.Last), true
	case info.Tail == 0:
		return start, true
	}
	return engine.Cursor{}, false
}

// ringInfos returns a snapshot of every rank's ring (ok false where the
// ring cannot be observed).
func (j *Job) ringInfos() ([]shm.RingInfo, []bool) {
	j.mu.Lock()
	obs := append([]*shm.Observer(nil), j.obs...)
	j.mu.Unlock()
	infos := make([]shm.RingInfo, len(obs))
	ok := make([]bool, len(obs))
	for i, o := range obs {
		if o != nil {
			infos[i], ok[i] = o.Info(), true
		}
	}
	return infos, ok
}

// snapshotCursors records each rank's standing (for a ring that later
// disappears) and whether any consumer is attached.
func (j *Job) snapshotCursors() (attached bool) {
	infos, ok := j.ringInfos()
	j.mu.Lock()
	defer j.mu.Unlock()
	for i := range infos {
		if !ok[i] || i >= len(j.ranks) {
			continue
		}
		if infos[i].ConsumerAttached {
			attached = true
		}
		if infos[i].Generation != j.ranks[i].Generation {
			continue
		}
		if c, known := standing(infos[i], j.ranks[i].Start); known {
			j.ranks[i].Next = &c
		}
	}
	return attached
}
