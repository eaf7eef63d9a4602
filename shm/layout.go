package shm

// Payload layout of a slot, as this producer writes it.
//
// The format (§5.2) lets a producer put each payload anywhere in the slot
// (256-byte aligned, inside used_bytes); the consumer reads each tensor
// from its own table entry. This producer chooses a layout that stays the
// same from batch to batch: every tensor whose size follows from the row
// count B (dense fields, ragged and jagged offsets, jagged lengths, validity
// masks) has a fixed place,
// in table order, right after the tensor table; the values of ragged
// fields, whose sizes change with every batch, follow them, in table order.
//
// Why: a consumer caches the views it builds for a slot and rebuilds only
// the table entries that changed since the slot's previous batch. With
// payloads packed in table order, a ragged field's values push every later
// payload to a new offset in every batch, so the consumer re-validates and
// rebuilds most of its views each time. With this layout, batches of the
// same B differ only in the ragged values entries' lengths, and a
// trainer's per-batch work stays O(ragged fields), not O(tensors).
//
// Rejected: padding each ragged field's values to a fixed capacity (wastes
// slot space, and consumers would have to be told the real length anyway).

// payloadLayout is the fixed part of the layout for batches of rows rows.
type payloadLayout struct {
	rows     int
	ok       bool
	off      []int64 // payload offset of tensor i (tensors of fixed size only)
	size     []int64 // its byte size (-1: a ragged values tensor)
	varStart int64   // where the first ragged values payload goes
}

// layout returns the fixed part of the layout for batches of rows rows,
// computing it only when the row count changes (it rarely does: every batch
// of a job but a padded or short last one has the same B).
func (p *Producer) layout(rows int) *payloadLayout {
	l := &p.lay
	if l.ok && l.rows == rows {
		return l
	}
	if l.off == nil {
		l.off = make([]int64, p.tensorCount)
		l.size = make([]int64, p.tensorCount)
	}
	it := planIter{fields: p.fields}
	end := tableEnd(p.tensorCount)
	for i := 0; i < p.tensorCount; i++ {
		fi, role, _ := it.next()
		f := &p.fields[fi]
		var n int64
		switch role {
		case RoleValues, RoleWeights:
			l.off[i], l.size[i] = 0, -1
			continue
		case RoleDense:
			n = int64(rows) * int64(f.DType.Size())
			for _, d := range f.Dims {
				n *= d
			}
		case RoleOffsets:
			n = (int64(rows)*f.rowsPer() + 1) * 8
		case RoleLengths:
			n = int64(rows) * f.rowsPer() * 8
		case RoleValidity:
			n = int64(rows)
		}
		l.off[i], l.size[i] = end, n
		end = alignUp(end+n, PayloadAlign)
	}
	l.rows, l.varStart, l.ok = rows, end, true
	return l
}

// layoutNeed returns the used_bytes of a batch whose tensors, in table
// order, have the given payload sizes, laid out as Add lays them out. It
// reads only the schema, so it is safe from any goroutine (Need).
func (p *Producer) layoutNeed(payloadBytes []int64) int64 {
	used := slotHeaderSize + int64(p.tensorCount)*tensorEntrySize
	end := tableEnd(p.tensorCount)
	for pass := 0; pass < 2; pass++ { // fixed-size tensors, then ragged values
		it := planIter{fields: p.fields}
		for _, n := range payloadBytes {
			_, role, _ := it.next()
			if variable(role) != (pass == 1) {
				continue
			}
			used = end + n
			end = alignUp(used, PayloadAlign)
		}
	}
	return used
}
