package engine

import (
	"sync"
	"sync/atomic"

	"github.com/lastmile/lastmile/shm"
)

// Cursor is where a rank's stream stands: the next batch to produce is
// batch Batch of epoch Epoch. A trainer that released batch (e, i) resumes
// at Cursor{e, i+1}; the engine moves to the next epoch by itself when
// epoch e has no batch i+1.
type Cursor struct {
	Epoch uint64 `json:"epoch"`
	Batch uint64 `json:"batch"`
}

// Less orders cursors.
func (c Cursor) Less(d Cursor) bool {
	return c.Epoch < d.Epoch || c.Epoch == d.Epoch && c.Batch < d.Batch
}

// Progress is a running job's live counters, safe to read from any
// goroutine while Run updates them (metrics, `lastmile top`).
type Progress struct {
	Rows, Batches, Bytes atomic.Int64 // packed into rings, padding included
	UnitsDone            atomic.Int64 // units decoded, all epochs
	UnitsInFlight        atomic.Int64 // units being decoded now
	DecodeNanos          atomic.Int64 // time workers spent decoding, summed
	PackNanos            atomic.Int64 // time spent packing batches
	Epoch                atomic.Int64 // epoch being produced

	mu    sync.Mutex
	rings []*shm.Producer
}

// RingStats returns each rank's ring counters (occupancy, time the
// producer waited on a full ring).
func (p *Progress) RingStats() []shm.ProducerStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]shm.ProducerStats, len(p.rings))
	for i, r := range p.rings {
		out[i] = r.Stats()
	}
	return out
}

func (p *Progress) setRings(r []*shm.Producer) {
	p.mu.Lock()
	p.rings = r
	p.mu.Unlock()
}
