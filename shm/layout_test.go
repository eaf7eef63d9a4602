package shm_test

import (
	"context"
	"testing"

	"github.com/lastmile/lastmile/shm"
)

// TestStableLayout checks the producer's payload layout (layout.go): for
// batches of the same row count every tensor of fixed size sits at the same
// offset whatever the ragged values hold, every ragged values payload comes
// after all of them, and Need predicts used_bytes exactly.
func TestStableLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	p := create(t, shm.Config{Dir: dir, Name: "layout", Slots: 4, SlotSize: 1 << 16, Fields: testFields})
	c := open(t, dir, "layout")
	fixed := map[int][]int64{} // rows -> offsets of the fixed-size tensors
	for seq := uint64(0); seq < 12; seq++ {
		if err := writeBatch(ctx, p, seq); err != nil {
			t.Fatal(err)
		}
		b, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkBatch(b, seq); err != nil {
			t.Fatal(err)
		}
		var offs, sizes []int64
		var fixedEnd, firstValues int64 = 0, -1
		for _, tn := range b.Tensors {
			sizes = append(sizes, int64(len(tn.Data)))
			if tn.Role == shm.RoleValues {
				if firstValues < 0 || tn.Offset < firstValues {
					firstValues = tn.Offset
				}
				continue
			}
			offs = append(offs, tn.Offset)
			fixedEnd = max(fixedEnd, tn.Offset+int64(len(tn.Data)))
		}
		if firstValues < fixedEnd {
			t.Errorf("batch %d: ragged values at %d, before the end %d of the fixed-size payloads", seq, firstValues, fixedEnd)
		}
		if prev, ok := fixed[b.Rows]; ok {
			for i := range prev {
				if prev[i] != offs[i] {
					t.Errorf("batch %d (%d rows): fixed-size tensor %d at %d, an earlier batch of as many rows had it at %d",
						seq, b.Rows, i, offs[i], prev[i])
				}
			}
		}
		fixed[b.Rows] = offs
		need, err := p.Need(sizes)
		if err != nil {
			t.Fatal(err)
		}
		if need != int64(len(b.Slot)) {
			t.Errorf("batch %d: Need says %d bytes, the slot used %d", seq, need, len(b.Slot))
		}
		c.Release()
	}
	if len(fixed) != 5 {
		t.Errorf("saw %d row counts, want 5", len(fixed))
	}
}
