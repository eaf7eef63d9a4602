package engine

import (
	"fmt"
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
		return shm.Field{Name: f.Name, Kind: shm.Jagged, DType: shm.DType(f.DType), Keys: f.group.Keys, Weighted: f.weighted()}
	}
	return f.OutField.ringField()
}

// weighted reports whether the field is a jagged group with weights.
func (f *packField) weighted() bool { return f.jagged() && len(f.group.Weights) > 0 }

// keys is the batch columns of a jagged group's keys: its first members,
// before their weights.
func (f *packField) keys() []int { return f.members[:len(f.group.Keys)] }

// jagged reports whether the field is a jagged group.
func (f *packField) jagged() bool { return f.group != nil && f.group.Kind == "jagged" }

// keyValues is the number of ids member column ci has in the span's
// rows: a list's values, or a scalar's valid rows (a null is an empty
// list).
func keyValues(sp *span, ci int) int64 {
	if sp.from != nil {
		var n int64
		for s, src := range sp.srcs {
			rows, c := sp.by.rows[s], &src.Columns[ci]
			switch {
			case c.Kind != column.Fixed:
				for _, r := range rows {
					n += c.Offsets[r+1] - c.Offsets[r]
				}
			case c.Valid == nil:
				n += int64(len(rows))
			default:
				for _, r := range rows {
					n += int64(c.Valid[r] & 1)
				}
			}
		}
		return n
	}
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
// stack's [B, N], a jagged group's values, offsets, lengths and weights.
func groupSizes(sizes []int64, f *packField, spans []span, rows int) []int64 {
	es := int64(f.DType.Size())
	if !f.jagged() {
		return append(sizes, int64(rows*f.Width)*es)
	}
	v := jaggedValues(f, spans)
	kb := int64(rows) * int64(len(f.keys()))
	sizes = append(sizes, v*es, (kb+1)*8, kb*8)
	if f.weighted() {
		sizes = append(sizes, v*4)
	}
	return sizes
}

// jaggedValues is the number of ids of jagged group f in the spans' rows.
func jaggedValues(f *packField, spans []span) int64 {
	var v int64
	for _, ci := range f.keys() {
		for k := range spans {
			v += keyValues(&spans[k], ci)
		}
	}
	return v
}

// fillGroup writes field i, a group, into the slot.
func fillGroup(slot *shm.Slot, i int, f *packField, spans []span, rows int, tmp *packScratch) error {
	if !f.jagged() {
		dst, err := slot.Add(i, shm.RoleDense, shm.DType(f.DType), int64(rows), int64(f.Width))
		if err != nil {
			return err
		}
		fillStack(dst, f.DType.Size(), f.members, spans, tmp)
		return nil
	}
	v := jaggedValues(f, spans)
	kb := int64(rows) * int64(len(f.keys()))
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
	// The lengths are computed on the heap and copied: fillWeights reads
	// them, and a slot is never read back (packScratch).
	if cap(tmp.lens) < int(kb) {
		tmp.lens = make([]int64, kb)
	}
	ls := tmp.lens[:kb]
	fillJagged(i64s(vals), i64s(offs), ls, f.keys(), spans, tmp)
	copy(i64s(lens), ls)
	tmp.midPack()
	if !f.weighted() {
		return nil
	}
	w, err := slot.Add(i, shm.RoleWeights, shm.Float32, v)
	if err != nil {
		return err
	}
	return fillWeights(f32s(w), ls, f, spans)
}

// fillWeights writes the weights of jagged group f key-major, lined up
// with its values: key k's from its weights member, 1 for the ids of a
// key without one. lens are the group's lengths as fillJagged wrote them.
func fillWeights(w []float32, lens []int64, f *packField, spans []span) error {
	at, v := 0, 0
	for k, m := range f.group.Weights {
		if m < 0 {
			for range rowsOf(spans) {
				for range lens[at] {
					w[v] = 1
					v++
				}
				at++
			}
			continue
		}
		ci := f.members[m]
		for s := range spans {
			sp := &spans[s]
			for j := sp.lo; j < sp.hi; j++ {
				c, r := sp.col(j, ci)
				ws := f32s(c.Data)
				lo, hi := int64(r), int64(r)+1 // a scalar key's weight
				if c.Kind != column.Fixed {
					lo, hi = c.Offsets[r], c.Offsets[r+1]
				} else if lens[at] == 0 {
					hi = lo // a null key: no id, no weight
				} else if c.Valid != nil && c.Valid[r] == 0 {
					return fmt.Errorf("jagged group %q: key %q has an id in a row whose weight is null; fill the weights first (a nulls op)", f.Name, f.group.Keys[k])
				}
				if hi-lo != lens[at] {
					return fmt.Errorf("jagged group %q: key %q has %d ids in a row and %d weights", f.Name, f.group.Keys[k], lens[at], hi-lo)
				}
				v += copy(w[v:], ws[lo:hi])
				at++
			}
		}
	}
	return nil
}

// rowsOf is the number of rows the spans hold.
func rowsOf(spans []span) int {
	n := 0
	for k := range spans {
		n += spans[k].hi - spans[k].lo
	}
	return n
}

// fillJagged writes the members of a jagged group key-major: for key k,
// row r of the batch, lengths[k*B+r] is the row's number of ids, offsets
// their running sum, and the ids follow one another in vals.
func fillJagged(vals, offs, lens []int64, members []int, spans []span, tmp *packScratch) {
	var v int64
	at := 0
	offs[0] = 0
	for _, ci := range members {
		for k := range spans {
			sp := &spans[k]
			if sp.from != nil {
				v = jaggedFrom(vals, offs, lens, ci, sp, at, v, tmp)
				at += sp.hi - sp.lo
				continue
			}
			c := &sp.b.Columns[ci]
			if c.Kind == column.Fixed && c.Valid == nil {
				v = jaggedScalars(vals, offs, lens, c, sp, at, v)
				at += sp.hi - sp.lo
				continue
			}
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

// jaggedScalars is fillJagged for a scalar key without nulls, column c
// of a one-batch span whose rows start at lens[at] and vals[v]: one id a
// row, gathered as a column is. It returns the next v.
func jaggedScalars(vals, offs, lens []int64, c *column.Column, sp *span, at int, v int64) int64 {
	n := sp.hi - sp.lo
	dst := vals[v : v+int64(n)]
	if sp.idx == nil {
		copy(dst, i64s(c.Data)[sp.lo:sp.hi])
	} else {
		data := i64s(c.Data)
		for q, r := range sp.idx[sp.lo:sp.hi] {
			dst[q] = data[r]
		}
	}
	ls, os := lens[at:at+n], offs[at+1:at+n+1]
	for q := range ls {
		ls[q] = 1
		os[q] = v + int64(q) + 1
	}
	return v + int64(n)
}

// jaggedFrom is fillJagged for member column ci of a span over several
// batches, whose rows start at lens[at] and vals[v]; it returns the next
// v. It goes a source at a time: the lengths, their running sum (on the
// heap: a slot is never read back, packScratch), then the ids to where
// the sum puts them.
func jaggedFrom(vals, offs, lens []int64, ci int, sp *span, at int, v int64, tmp *packScratch) int64 {
	n := sp.hi - sp.lo
	ls := lens[at : at+n]
	for s, src := range sp.srcs {
		pos, rows, c := sp.by.pos[s], sp.by.rows[s], &src.Columns[ci]
		switch {
		case c.Kind != column.Fixed:
			for k, r := range rows {
				ls[pos[k]] = c.Offsets[r+1] - c.Offsets[r]
			}
		case c.Valid == nil:
			for _, p := range pos {
				ls[p] = 1
			}
		default:
			for k, r := range rows {
				ls[pos[k]] = int64(c.Valid[r] & 1)
			}
		}
	}
	ends := tmp.grow(n)
	for q, l := range ls {
		v += l
		ends[q] = v
	}
	copy(offs[at+1:at+n+1], ends)
	tmp.midPack()
	for s, src := range sp.srcs {
		pos, rows, c := sp.by.pos[s], sp.by.rows[s], &src.Columns[ci]
		data := i64s(c.Data)
		for k, r := range rows {
			p := int(pos[k])
			end := ends[p]
			if c.Kind == column.Fixed {
				if ls[p] == 1 {
					vals[end-1] = data[r]
				}
				continue
			}
			lo := c.Offsets[r]
			copy(vals[end-ls[p]:end], data[lo:lo+ls[p]])
		}
	}
	return v
}

func i64s(b []byte) []int64 {
	return unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)
}

func f32s(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}
