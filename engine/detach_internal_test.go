package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/ops"
	"github.com/lastmile/lastmile/shm"
)

// detachBatch is n rows of a scalar key k0, a list key k1 with float32
// weights w1 lined up with its ids, and a plain list column l.
func detachBatch(n, base int) *column.Batch {
	k0 := column.Column{Name: "k0", Kind: column.Fixed, DType: column.Int64, Width: 1, Len: n}
	k1 := column.Column{Name: "k1", Kind: column.List, DType: column.Int64, Len: n, Offsets: []int64{0}}
	w1 := column.Column{Name: "w1", Kind: column.List, DType: column.Float32, Len: n, Offsets: []int64{0}}
	l := column.Column{Name: "l", Kind: column.List, DType: column.Int64, Len: n, Offsets: []int64{0}}
	for i := range n {
		r := base + i
		k0.Data = binary.LittleEndian.AppendUint64(k0.Data, uint64(r))
		for j := range r%4 + 1 {
			k1.Data = binary.LittleEndian.AppendUint64(k1.Data, uint64(r*10+j))
			w1.Data = binary.LittleEndian.AppendUint32(w1.Data, math.Float32bits(float32(j)+0.5))
		}
		for j := range r % 7 {
			l.Data = binary.LittleEndian.AppendUint64(l.Data, uint64(r*100+j))
		}
		k1.Offsets = append(k1.Offsets, int64(len(k1.Data)/8))
		w1.Offsets = append(w1.Offsets, int64(len(w1.Data)/4))
		l.Offsets = append(l.Offsets, int64(len(l.Data)/8))
	}
	return &column.Batch{Rows: n, Columns: []column.Column{k0, k1, w1, l}}
}

// A hand-over swaps a producer's mapping for private zeros at any moment
// (shm.Producer.Detach), so a packer must never read back what it wrote
// to a slot. Here the swap lands where packers once did read back: after
// a list's offsets and a jagged group's lengths are written, before the
// values and the weights that were placed by them. Packing must go on as
// if nothing happened, from a window of one batch and of several.
func TestPackSurvivesDetachMidSlot(t *testing.T) {
	groups := []ops.Group{{Name: "g", Kind: "jagged", DType: column.Int64, Keys: []string{"k0", "k1"}, Weights: []int{-1, 2}}}
	out := []OutField{
		{Name: "k0", Kind: column.Fixed, DType: column.Int64, Width: 1, Group: 1},
		{Name: "k1", Kind: column.List, DType: column.Int64, Group: 1},
		{Name: "w1", Kind: column.List, DType: column.Float32, Group: 1},
		{Name: "l", Kind: column.List, DType: column.Int64},
	}
	fields := packFields(out, groups)
	ringFields := make([]shm.Field, len(fields))
	for i := range fields {
		ringFields[i] = fields[i].ringField()
	}
	a, b := detachBatch(300, 0), detachBatch(200, 300)
	from, idx := make([]int32, 500), make([]int32, 500)
	for j := range 500 {
		r := (j * 7) % 500 // a permutation: 7 is prime to 500
		if r < 300 {
			from[j], idx[j] = 0, int32(r)
		} else {
			from[j], idx[j] = 1, int32(r-300)
		}
	}
	perm := make([]int32, 300)
	for j := range perm {
		perm[j] = int32((j * 7) % 300)
	}
	cases := map[string]span{
		"one batch":       {b: a, lo: 0, hi: 300, idx: perm},
		"several batches": {lo: 0, hi: 500, srcs: []*column.Batch{a, b}, from: from, idx: idx},
	}
	for name, sp := range cases {
		// Count the points, then hand over at each in turn.
		points := packWithDetach(t, fields, ringFields, sp, 0)
		if points == 0 {
			t.Fatalf("%s: no packer reached a point where a hand-over lands", name)
		}
		for at := 1; at <= points; at++ {
			t.Run(fmt.Sprintf("%s/point %d of %d", name, at, points), func(t *testing.T) {
				packWithDetach(t, fields, ringFields, sp, at)
			})
		}
	}
}

// packWithDetach packs sp into a fresh ring, detaching the producer at the
// at-th point packers reach (none when at is 0), and returns the number
// of points reached. Packing must succeed.
func packWithDetach(t *testing.T, fields []packField, ringFields []shm.Field, sp span, at int) int {
	t.Helper()
	p, err := shm.Create(shm.Config{Dir: t.TempDir(), Name: "detach", Slots: 2, SlotSize: 4 << 20, Fields: ringFields})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	bt := newBatcher(sp.hi-sp.lo, 1, "drop", fields, []slotWriter{p}, new(Progress))
	points := 0
	bt.tmp.mid = func() {
		points++
		if points == at {
			if _, err := p.Detach(); err != nil {
				t.Error(err)
			}
		}
	}
	slot, err := bt.pack(context.Background(), p, []span{sp}, sp.hi-sp.lo)
	if err != nil {
		t.Fatalf("packing with a hand-over at point %d: %v", at, err)
	}
	p.Discard(slot)
	return points
}
