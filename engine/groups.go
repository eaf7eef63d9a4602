package engine

import (
	"unsafe"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/ops"
	"github.com/lastmile/lastmile/shm"
)

// packField is one field of the rings: a column of the batches, or a
// feature group (ops.Group) that the packer writes straight from its
// member columns into the slot: a stack as one [B, N] tensor (stack.go), a
// jagged group as a KeyedJaggedTensor (values key-major, offsets,
// lengths). No copy of a group exists outside the slot.
type packField struct {
	OutField            // the field; a group's Kind is List
	col      int        // the batch column of a field that is a column
	members  []int      // the batch columns of a group's members, in order
	parts    []OutField // the members' fields, in order (slot sizing)
	group    *ops.Group
}

// packFields returns the ring fields of batches whose columns are fields:
// one per column, one per group in place of its members.
func packFields(fields []OutField, groups []ops.Group) []packField {
	var out []packField
	for i, f := range fields {
		if f.Group == 0 {
			out = append(out, packField{OutField: f, col: i})
			continue
		}
		if len(out) > 0 && out[len(out)-1].group == &groups[f.Group-1] {
			out[len(out)-1].members = append(out[len(out)-1].members, i)
			out[len(out)-1].parts = append(out[len(out)-1].parts, f)
			continue
		}
		g := &groups[f.Group-1]
		pf := packField{OutField: OutField{Name: g.Name, Kind: column.Fixed, DType: g.DType, Width: 1}, group: g, members: []int{i}, parts: []OutField{f}}
		if g.Kind == "jagged" {
			pf.Kind = column.List
		}
		out = append(out, pf)
	}
	for i := range out {
		if out[i].group != nil && !out[i].jagged() {
			out[i].Width = len(out[i].members)
		}
	}
	return out
}

// ringField maps a field to the ring's schema.
func (f *packField) ringField() shm.Field {
	if f.jagged() {
		return shm.Field{Name: f.Name, Kind: shm.Jagged, DType: shm.DType(f.DType), Keys: f.group.Keys}
	}
	return f.OutField.ringField()
}

// jagged reports whether the field is a jagged group.
func (f *packField) jagged() bool { return f.group != nil && f.group.Kind == "jagged" }

// keyValues is the number of ids member column ci has in the span's
// rows: a list's values, or a scalar's valid rows (a null is an empty
// list).
func keyValues(sp *span, ci int) int64 {
	c := &sp.b.Columns[ci]
	if c.Kind != column.Fixed {
		return sp.values(ci)
	}
	if c.Valid == nil {
		return int64(sp.hi - sp.lo)
	}
	var n int64
	for j := sp.lo; j < sp.hi; j++ {
		n += int64(c.Valid[sp.row(j)])
	}
	return n
}

// groupSizes appends the payload sizes of a group's tensors to sizes: a
// stack's [B, N], a jagged group's values, offsets and lengths.
func groupSizes(sizes []int64, f *packField, spans []span, rows int) []int64 {
	es := int64(f.DType.Size())
	if !f.jagged() {
		return append(sizes, int64(rows*f.Width)*es)
	}
	var v int64
	for _, ci := range f.members {
		for k := range spans {
			v += keyValues(&spans[k], ci)
		}
	}
	kb := int64(rows) * int64(len(f.members))
	return append(sizes, v*es, (kb+1)*8, kb*8)
}

// fillGroup writes field i, a group, into the slot.
func fillGroup(slot *shm.Slot, i int, f *packField, spans []span, rows int) error {
	if !f.jagged() {
		dst, err := slot.Add(i, shm.RoleDense, shm.DType(f.DType), int64(rows), int64(f.Width))
		if err != nil {
			return err
		}
		fillStack(dst, f.DType.Size(), f.members, spans)
		return nil
	}
	var v int64
	for _, ci := range f.members {
		for k := range spans {
			v += keyValues(&spans[k], ci)
		}
	}
	kb := int64(rows) * int64(len(f.members))
	vals, err := slot.Add(i, shm.RoleValues, shm.Int64, v)
	if err != nil {
		return err
	}
	offs, err := slot.Add(i, shm.RoleOffsets, shm.Int64, kb+1)
	if err != nil {
		return err
	}
	lens, err := slot.Add(i, shm.RoleLengths, shm.Int64, kb)
	if err != nil {
		return err
	}
	fillJagged(i64s(vals), i64s(offs), i64s(lens), f.members, spans)
	return nil
}

// fillJagged writes the members of a jagged group key-major: for key k,
// row r of the batch, lengths[k*B+r] is the row's number of ids, offsets
// their running sum, and the ids follow one another in vals.
func fillJagged(vals, offs, lens []int64, members []int, spans []span) {
	var v int64
	at := 0
	offs[0] = 0
	for _, ci := range members {
		for k := range spans {
			sp := &spans[k]
			c := &sp.b.Columns[ci]
			for j := sp.lo; j < sp.hi; j++ {
				r := sp.row(j)
				var l int64
				if c.Kind == column.Fixed {
					if c.Valid == nil || c.Valid[r] != 0 {
						vals[v] = i64s(c.Data)[r]
						l = 1
					}
				} else {
					lo, hi := c.Offsets[r], c.Offsets[r+1]
					l = int64(copy(vals[v:v+hi-lo], i64s(c.Data)[lo:hi]))
				}
				v += l
				lens[at] = l
				at++
				offs[at] = v
			}
		}
	}
}

func i64s(b []byte) []int64 {
	return unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)
}
