package engine

import (
	"context"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// The arena's chunks: taken by the buffers that decode into them, given
// back when the buffer computes its next unit, free again only once
// every ring released what named them; with none free a unit decodes to
// the heap, and its buffer keeps no arena memory the decoder would reuse.
func TestArenaChunks(t *testing.T) {
	dir := t.TempDir()
	ua, err := newUnitArena(&spec.Job{Ring: spec.Ring{Dir: dir}}, 4096, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ua.close(true)
	fields := []shm.Field{{Name: "x", Kind: shm.Dense, DType: shm.DType(column.Int64)}}
	p, err := shm.Create(shm.Config{Dir: dir, Name: "r", Slots: 2, SlotSize: 1 << 16, Fields: fields, Arena: ua.a})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !ua.use([]*shm.Producer{p}) {
		t.Fatal("a created ring is not served by its arena")
	}
	decodeInto := func(b *column.Batch) bool {
		alloc := ua.prepare(b)
		if alloc == nil {
			b.Columns = []column.Column{{Data: make([]byte, 0, 64)}}
			return false
		}
		b.Columns = []column.Column{{Data: alloc(800)}}
		if alloc(4096) != nil {
			t.Fatal("a chunk of 4096 bytes gave 800 and then 4096 more")
		}
		return true
	}
	var b1, b2, b3 column.Batch
	if !decodeInto(&b1) || !decodeInto(&b2) {
		t.Fatal("two buffers did not get the arena's two chunks")
	}
	// b1's unit is packed into batch 0 of the ring.
	s, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s.SetRows(100)
	if err := s.AddArena(0, shm.RoleDense, shm.DType(column.Int64), b1.Columns[0].Data[:800], 100); err != nil {
		t.Fatal(err)
	}
	ua.named(&b1, 0, s.Seq())
	if err := p.Publish(s); err != nil {
		t.Fatal(err)
	}
	// No chunk is free: b3 decodes to the heap.
	if decodeInto(&b3) {
		t.Fatal("a third buffer got a chunk of a two-chunk arena")
	}
	// b1 computes its next unit: its chunk goes back, but batch 0 still
	// names it, so b1 gets none, and keeps no arena memory.
	if alloc := ua.prepare(&b1); alloc != nil {
		t.Fatal("a chunk named by an unreleased batch was taken again")
	}
	if b1.Columns[0].Data != nil {
		t.Fatal("a buffer that got no chunk kept its arena memory")
	}
	// The trainer releases batch 0: the chunk is free.
	c, err := shm.Open(dir, "r")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Release()
	if !decodeInto(&b3) {
		t.Fatal("the released chunk was not taken")
	}
	if got, want := ua.fallbacks.Load(), int64(2); got != want {
		t.Errorf("%d fallbacks, want %d", got, want)
	}
}

// The chunk count: the units in flight, plus the units the unreleased
// batches can name, counted by the smallest units, at most one a batch.
func TestArenaLayoutChunks(t *testing.T) {
	cases := []struct {
		name  string
		rows  []int64
		rings int
		want  int64
	}{
		// 2 rings × (4 slots + 2 held) × 500 rows = 6000 rows unreleased.
		{"units larger than the window", []int64{20000, 20000}, 2, 2 + 2},
		{"uniform units", []int64{1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000}, 2, 2 + 6 + 2},
		{"a large unit beside small ones", append([]int64{20000}, slices.Repeat([]int64{500}, 48)...), 2, 2 + 12},
		{"one ring", append([]int64{20000}, slices.Repeat([]int64{500}, 48)...), 1, 2 + 6},
		{"tiny units: a batch names one chunk", slices.Repeat([]int64{10}, 1000), 2, 2 + 12},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := arenaLayout{chunk: 4096, inflight: 2, perRing: 4 + shm.MaxHeld, batch: 500, rows: c.rows}
			slices.Sort(l.rows)
			if got := l.chunks(c.rings); got != c.want {
				t.Errorf("%d chunks, want %d", got, c.want)
			}
			if n, err := l.bytes(c.rings); err != nil || n != c.want*4096 {
				t.Errorf("%d bytes (%v), want %d", n, err, c.want*4096)
			}
		})
	}
}
