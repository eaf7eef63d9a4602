package engine

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/column"
)

// jaggedBatch is n rows of seven scalar int64 keys (the third with
// nulls) and one list key of 0 to 40 ids.
func jaggedBatch(n int) *column.Batch {
	b := &column.Batch{Rows: n}
	for k := range 7 {
		c := column.Column{Kind: column.Fixed, DType: column.Int64, Width: 1, Len: n}
		for r := range n {
			c.Data = binary.LittleEndian.AppendUint64(c.Data, uint64(r*10+k))
		}
		if k == 2 {
			c.Valid = make([]byte, n)
			for r := range c.Valid {
				c.Valid[r] = byte(min(r%5, 1))
			}
		}
		b.Columns = append(b.Columns, c)
	}
	l := column.Column{Kind: column.List, DType: column.Int64, Len: n, Offsets: []int64{0}}
	for r := range n {
		for j := range r % 41 {
			l.Data = binary.LittleEndian.AppendUint64(l.Data, uint64(r*100+j))
		}
		l.Offsets = append(l.Offsets, int64(len(l.Data)/8))
	}
	b.Columns = append(b.Columns, l)
	return b
}

// fillJaggedSpans packs the group of every column of the spans' batches
// and returns its values, offsets and lengths.
func fillJaggedSpans(spans []span) (vals, offs, lens []int64) {
	members := []int{0, 1, 2, 3, 4, 5, 6, 7}
	rows := rowsOf(spans)
	var v int64
	for _, ci := range members {
		for k := range spans {
			v += keyValues(&spans[k], ci)
		}
	}
	vals, offs, lens = make([]int64, v), make([]int64, rows*len(members)+1), make([]int64, rows*len(members))
	fillJagged(vals, offs, lens, members, spans, new(packScratch))
	return vals, offs, lens
}

// fillJagged gives the same group for a batch in order, through an
// index, and over several batches (a shuffle window's span, a source at a
// time): each checked against a row-at-a-time reference.
func TestFillJaggedPaths(t *testing.T) {
	a, b := jaggedBatch(700), jaggedBatch(500)
	perm := rand.New(rand.NewPCG(5, 6)).Perm(1200)
	var all column.Batch
	all.AppendRows(a, 0, a.Rows)
	all.AppendRows(b, 0, b.Rows)
	idx, from, rows := make([]int32, len(perm)), make([]int32, len(perm)), make([]int32, len(perm))
	for j, p := range perm {
		idx[j] = int32(p)
		if p < 700 {
			from[j], rows[j] = 0, int32(p)
		} else {
			from[j], rows[j] = 1, int32(p-700)
		}
	}
	// The reference: every row appended one at a time, then packed in order.
	var ref column.Batch
	for _, p := range perm {
		ref.AppendRows(&all, p, p+1)
	}
	wv, wo, wl := fillJaggedSpans([]span{{b: &ref, lo: 0, hi: ref.Rows}})
	multi := span{lo: 0, hi: len(perm), srcs: []*column.Batch{a, b}, from: from, idx: rows}
	multi.by = new(bySource).build(&multi)
	for name, spans := range map[string][]span{
		"index":           {{b: &all, lo: 0, hi: len(perm), idx: idx}},
		"index, split":    {{b: &all, lo: 0, hi: 300, idx: idx}, {b: &all, lo: 300, hi: len(perm), idx: idx}},
		"several batches": {multi},
	} {
		gv, gofs, gl := fillJaggedSpans(spans)
		if !slices.Equal(gv, wv) || !slices.Equal(gofs, wo) || !slices.Equal(gl, wl) {
			t.Errorf("%s: the group differs from packing the rows in order", name)
		}
	}
}

// BenchmarkFillJagged packs a 2048-row batch of a jagged group of seven
// scalar keys and a list key from a 16384-row shuffle window.
//
//	go test -run '^$' -bench FillJagged -count 5 ./engine/
func BenchmarkFillJagged(b *testing.B) {
	win := jaggedBatch(16384)
	idx := make([]int32, 2048)
	for j, p := range rand.New(rand.NewPCG(7, 8)).Perm(16384)[:2048] {
		idx[j] = int32(p)
	}
	spans := []span{{b: win, lo: 0, hi: 2048, idx: idx}}
	vals, offs, lens := fillJaggedSpans(spans)
	b.SetBytes(int64(8 * (len(vals) + len(offs) + len(lens))))
	var tmp packScratch
	for b.Loop() {
		fillJagged(vals, offs, lens, []int{0, 1, 2, 3, 4, 5, 6, 7}, spans, &tmp)
	}
}
