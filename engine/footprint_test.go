package engine

import (
	"context"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/spec"
)

// TestUnitBytesEstimate holds the footprint's unit estimate against what
// decoding a unit really takes (the columns' buffers): within 1x to 1.5x,
// so that the heap limit made of it neither starves a run nor leaves the
// collector's slack unbounded; and the shuffle window and cache count.
func TestUnitBytesEstimate(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		columns []string
		unit    int64
	}{
		{"all columns, whole row groups", nil, 0},
		{"all columns, sliced units", nil, 700},
		{"lists and text", []string{"seq_0", "query"}, 0},
		{"scalars", []string{"label", "dense_0", "cat_0"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := decode.PlanFiles(ctx, []string{"../testdata/small"}, decode.PlanOptions{Columns: tc.columns, MaxUnitRows: tc.unit})
			if err != nil {
				t.Fatal(err)
			}
			dec := plan.NewDecoder()
			defer dec.Close()
			for _, u := range plan.Units[:3] {
				var b column.Batch
				if err := dec.Decode(ctx, u, &b); err != nil {
					t.Fatal(err)
				}
				var real int64
				for _, c := range b.Columns {
					real += int64(len(c.Data) + 8*len(c.Offsets) + len(c.Valid))
				}
				est := decodedUnitBytes(plan, u)
				if r := float64(est) / float64(real); r < 1 || r > 1.5 {
					t.Errorf("unit %d (%d rows): estimate %d bytes, decoded %d: ratio %.2f, want 1 to 1.5", u.Seq, u.Rows, est, real, r)
				}
			}
		})
	}
	job := &spec.Job{Name: "fp", Inputs: []string{"../testdata/small"}, WorldSize: 1, Batch: spec.Batch{Size: 100},
		Ring: spec.Ring{Slots: 4}, Shuffle: spec.Shuffle{Buffer: 1000}, Cache: spec.Cache{MaxMemory: 1 << 20}}
	fp, err := EstimateFootprint(ctx, job, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fp.ShuffleBytes <= 0 || fp.CacheBytes != 1<<20 || fp.Bytes() != fp.RingBytes+int64(fp.InFlight)*fp.UnitBytes+fp.ShuffleBytes+fp.CacheBytes {
		t.Errorf("footprint %+v", fp)
	}
	if got, want := HeapLimit(fp), fp.Bytes()-fp.RingBytes+heapOverhead; got != want {
		t.Errorf("HeapLimit %d, want %d", got, want)
	}
}

// ForRanks keeps everything but the rings: one host's share of a world
// has the rings of its own ranks only.
func TestFootprintForRanks(t *testing.T) {
	f := Footprint{Rings: 8, RingBytes: 8 * 100, InFlight: 4, UnitBytes: 50, ShuffleBytes: 7, CacheBytes: 11, SideBytes: 13}
	for _, tc := range []struct{ ranks, rings int }{{8, 800}, {2, 200}, {1, 100}} {
		g := f.ForRanks(tc.ranks)
		if g.Rings != tc.ranks || g.RingBytes != int64(tc.rings) || g.Bytes() != f.Bytes()-800+int64(tc.rings) {
			t.Errorf("ForRanks(%d): %+v", tc.ranks, g)
		}
	}
}
