package shm_test

import (
	"context"
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/shm"
)

// weightedFields has a weighted jagged field between a ragged one and a
// plain jagged one, so that its weights' place among the variable-size
// payloads is checked too.
var weightedFields = []shm.Field{
	{Name: "ids", Kind: shm.Ragged, DType: shm.Int64},
	{Name: "scored", Kind: shm.Jagged, DType: shm.Int64, Keys: []string{"cats", "hist"}, Weighted: true},
	{Name: "plain", Kind: shm.Jagged, DType: shm.Int64, Keys: []string{"u"}},
}

func f32bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// addJagged adds field fi's values, offsets and lengths for key-major
// lengths, the values numbered from 0.
func addJagged(s *shm.Slot, fi int, lengths []int64) (values int64, err error) {
	offs := []int64{0}
	var vals []int64
	for _, l := range lengths {
		for range l {
			vals = append(vals, int64(len(vals)))
		}
		offs = append(offs, int64(len(vals)))
	}
	if err := s.AddTensor(fi, shm.RoleValues, shm.Int64, i64bytes(vals), int64(len(vals))); err != nil {
		return 0, err
	}
	if err := s.AddTensor(fi, shm.RoleOffsets, shm.Int64, i64bytes(offs), int64(len(offs))); err != nil {
		return 0, err
	}
	return int64(len(vals)), s.AddTensor(fi, shm.RoleLengths, shm.Int64, i64bytes(lengths), int64(len(lengths)))
}

// writeWeighted fills a slot of weightedFields: rows rows, the weighted
// field's key-major lengths and its weights (nil: one per value, 0.5
// apart), then publishes it.
func writeWeighted(ctx context.Context, p *shm.Producer, rows int, lengths []int64, weights []float32) error {
	s, err := p.Acquire(ctx)
	if err != nil {
		return err
	}
	if err := s.SetRows(rows); err != nil {
		return err
	}
	if err := s.AddTensor(0, shm.RoleValues, shm.Int64, nil, 0); err != nil {
		return err
	}
	if err := s.AddTensor(0, shm.RoleOffsets, shm.Int64, make([]byte, 8*(rows+1)), int64(rows+1)); err != nil {
		return err
	}
	v, err := addJagged(s, 1, lengths)
	if err != nil {
		return err
	}
	if weights == nil {
		for i := range v {
			weights = append(weights, float32(i)/2)
		}
	}
	if err := s.AddTensor(1, shm.RoleWeights, shm.Float32, f32bytes(weights), int64(len(weights))); err != nil {
		p.Discard(s)
		return err
	}
	if _, err := addJagged(s, 2, make([]int64, rows)); err != nil {
		return err
	}
	return p.Publish(s)
}

// TestWeightedRoundTrip writes batches with a weighted jagged field and
// reads them back: the ring is format 3, the schema keeps the flag, and
// the weights come back as written, after the lengths, one per value.
func TestWeightedRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	p := create(t, shm.Config{Dir: dir, Name: "weighted", Slots: 4, SlotSize: 1 << 16, Fields: weightedFields})
	c := open(t, dir, "weighted")
	h := c.Header()
	if h.VersionMajor != 3 || !h.Fields[1].Weighted || h.Fields[2].Weighted {
		t.Fatalf("version %d.%d, weighted %v %v; want 3.x, true false", h.VersionMajor, h.VersionMinor, h.Fields[1].Weighted, h.Fields[2].Weighted)
	}
	if n := shm.TensorCount(weightedFields); n != 2+4+3 {
		t.Fatalf("TensorCount = %d, want 9", n)
	}
	for _, tc := range []struct {
		rows    int
		lengths []int64
	}{
		{2, []int64{1, 3, 0, 2}},
		{1, []int64{0, 0}},
		{3, []int64{2, 2, 2, 0, 0, 9}},
	} {
		if err := writeWeighted(ctx, p, tc.rows, tc.lengths, nil); err != nil {
			t.Fatal(err)
		}
		b, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var v int64
		for _, l := range tc.lengths {
			v += l
		}
		w := b.Tensor("scored", shm.RoleWeights)
		if w == nil || w.DType != shm.Float32 || !slices.Equal(w.Shape, []int64{v}) {
			t.Fatalf("rows %d: weights tensor %+v, want float32 [%d]", tc.rows, w, v)
		}
		for i := range v {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(w.Data[4*i:])); got != float32(i)/2 {
				t.Errorf("rows %d: weight %d is %v, want %v", tc.rows, i, got, float32(i)/2)
			}
		}
		if b.Tensor("plain", shm.RoleWeights) != nil {
			t.Errorf("rows %d: the unweighted field has weights", tc.rows)
		}
		c.Release()
	}
}

// TestWeightedRejects checks the schema and slot rules of weights: only a
// jagged field has them, they are float32, one per value, and a slot
// of a weighted field has them in their place.
func TestWeightedRejects(t *testing.T) {
	t.Parallel()
	for _, f := range []shm.Field{
		{Name: "d", Kind: shm.Dense, DType: shm.Float32, Weighted: true},
		{Name: "r", Kind: shm.Ragged, DType: shm.Int64, Weighted: true},
	} {
		_, err := shm.Create(shm.Config{Dir: t.TempDir(), Name: "bad", Slots: 2, SlotSize: 1 << 16, Fields: []shm.Field{f}})
		if err == nil || !strings.Contains(err.Error(), "only a jagged field has weights") {
			t.Errorf("%v field with weights: err %v", f.Kind, err)
		}
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		weights []float32
		want    string
	}{
		{"one weight short", []float32{1, 2, 3}, "weights: 3, for 4 values"},
		{"one weight over", []float32{1, 2, 3, 4, 5}, "weights: 5, for 4 values"},
	} {
		dir := t.TempDir()
		p := create(t, shm.Config{Dir: dir, Name: "w", Slots: 2, SlotSize: 1 << 16, Fields: weightedFields})
		err := writeWeighted(ctx, p, 2, []int64{1, 1, 1, 1}, tc.weights)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}

	dir := t.TempDir()
	p := create(t, shm.Config{Dir: dir, Name: "w", Slots: 2, SlotSize: 1 << 16, Fields: weightedFields})
	s, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Discard(s)
	s.SetRows(1)
	if err := s.AddTensor(0, shm.RoleValues, shm.Int64, nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.AddTensor(0, shm.RoleOffsets, shm.Int64, make([]byte, 16), 2); err != nil {
		t.Fatal(err)
	}
	if _, err := addJagged(s, 1, []int64{1, 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(1, shm.RoleWeights, shm.Int64, 1); err == nil || !strings.Contains(err.Error(), "dtype int64, want float32") {
		t.Errorf("int64 weights: %v", err)
	}
	if _, err := s.Add(2, shm.RoleValues, shm.Int64, 0); err == nil || !strings.Contains(err.Error(), "role weights") {
		t.Errorf("the next field before the weights: %v", err)
	}
}
