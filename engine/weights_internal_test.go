package engine

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/ops"
)

// TestFillWeightsScalar: a scalar key's weights are a scalar column, one
// weight for the row's one id: none for a null key, and a null weight of
// an id fails the batch, naming the key.
func TestFillWeightsScalar(t *testing.T) {
	f32 := func(v ...float32) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
		return b
	}
	item := column.Column{Name: "item", Kind: column.Fixed, DType: column.Int64, Width: 1, Len: 3,
		Data: make([]byte, 24), Valid: []byte{1, 0, 1}}
	g := &ops.Group{Name: "sparse", Kind: "jagged", DType: column.Int64, Keys: []string{"item"}, Weights: []int{1}}
	f := &packField{group: g, members: []int{0, 1}}
	for _, tc := range []struct {
		name  string
		valid []byte
		want  []float32
		err   string
	}{
		{"every id weighed", []byte{1, 0, 1}, []float32{0.5, 2.5}, ""},
		{"no weight for a null key", nil, []float32{0.5, 2.5}, ""},
		{"a null weight of an id", []byte{1, 1, 0}, nil, `key "item" has an id in a row whose weight is null`},
	} {
		rating := column.Column{Name: "rating", Kind: column.Fixed, DType: column.Float32, Width: 1, Len: 3,
			Data: f32(0.5, 1.5, 2.5), Valid: tc.valid}
		b := &column.Batch{Columns: []column.Column{item, rating}, Rows: 3}
		spans := []span{{b: b, lo: 0, hi: 2}, {b: b, lo: 2, hi: 3}}
		w := make([]float32, 2)
		err := fillWeights(w, []int64{1, 0, 1}, f, spans)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.err)
		case tc.err == "" && (err != nil || !slices.Equal(w, tc.want)):
			t.Errorf("%s: weights %v (%v), want %v", tc.name, w, err, tc.want)
		}
	}
}
