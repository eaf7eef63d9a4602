package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/shm"
)

// Packing: a batch's rows, given as spans of unit outputs (in order, or
// gathered through a shuffle window's permutation), written field by
// field into a ring slot. It is the last copy of a row before the
// trainer's tensors view it; with a shuffle window, the rows a window held
// past their unit's add were copied once before, into the window
// (window.go).

// pack writes rows from spans into a slot of ring w and returns the slot,
// filled but not published.
func (b *batcher) pack(ctx context.Context, w slotWriter, spans []span, rows int) (*shm.Slot, error) {
	start := time.Now()
	for k := range spans {
		if spans[k].from != nil {
			if len(b.bySrc) <= k {
				b.bySrc = append(b.bySrc, make([]bySource, k+1-len(b.bySrc))...)
			}
			spans[k].by = b.bySrc[k].build(&spans[k])
		}
	}
	sizes := b.sizes[:0]
	var total int64
	for _, f := range b.fields {
		if f.group != nil {
			sizes = groupSizes(sizes, &f, spans, rows)
			continue
		}
		es := int64(f.DType.Size())
		switch f.Kind {
		case column.Fixed:
			sizes = append(sizes, int64(rows*f.Width)*es)
		default:
			var v int64
			for _, sp := range spans {
				v += sp.values(f.col)
			}
			sizes = append(sizes, v*es, int64(rows+1)*8)
		}
		if f.Nullable {
			sizes = append(sizes, int64(rows))
		}
	}
	for _, s := range sizes {
		total += s
	}
	b.sizes = sizes
	if _, err := w.Need(sizes); err != nil {
		var tl *shm.TooLargeError
		if errors.As(err, &tl) {
			return nil, fmt.Errorf("%w: a batch of %d rows needs %d bytes; set ring.slot_size to at least %d, or lower batch.size",
				err, rows, tl.Need, tl.Need)
		}
		return nil, err
	}
	acquire := time.Now()
	slot, err := w.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	// Acquire's time is the sleep on a full ring (the trainers' time,
	// counted apart in FullWait): it is not packing. Leaving it out here,
	// rather than subtracting FullWait later, keeps the pack time a
	// counter: FullWait includes a wait under way, which PackNanos did not
	// yet, so the difference fell while the ring stayed full.
	start = start.Add(time.Since(acquire))
	if err := b.fill(slot, spans, rows); err != nil {
		w.Discard(slot)
		return nil, fmt.Errorf("pack batch for ring %q: %w", w.Name(), err)
	}
	b.prog.Rows.Add(int64(rows))
	b.prog.Batches.Add(1)
	b.prog.Bytes.Add(total)
	b.lastBytes = total
	b.prog.PackNanos.Add(int64(time.Since(start)))
	return slot, nil
}

func (b *batcher) fill(slot *shm.Slot, spans []span, rows int) error {
	if err := slot.SetRows(rows); err != nil {
		return err
	}
	for i := range b.fields {
		f := &b.fields[i]
		var err error
		switch {
		case f.group != nil:
			err = fillGroup(slot, i, f, spans, rows, &b.tmp)
		case b.fillFromArena(slot, i, f, spans, rows, &err):
		case f.Kind == column.Fixed:
			err = fillFixed(slot, i, f, spans, rows, b.skipCopy)
		default:
			err = fillList(slot, i, f, spans, rows, &b.tmp, b.skipCopy)
		}
		if err == nil && f.group == nil && f.Nullable {
			err = fillValidity(slot, i, f.col, spans, rows)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// fillFromArena packs field i by pointing into the unit arena, and
// reports whether it did (setting *err if that failed half way): when
// the batch's rows are a run of one unit's
// rows, in order, that the unit decoded into its arena chunk (arena.go).
// A list's offsets, rebased, are written into the slot; its values are
// named where they are. Anything else is left to fillFixed or fillList.
func (b *batcher) fillFromArena(slot *shm.Slot, i int, f *packField, spans []span, rows int, err *error) bool {
	if b.arena == nil || len(spans) != 1 || spans[0].from != nil || spans[0].idx != nil || f.Kind == column.Bytes {
		return false
	}
	sp, ci, es := &spans[0], f.col, f.DType.Size()
	if f.Kind == column.Fixed {
		w := es * f.Width
		p := b.arena.data(sp.b, ci, sp.lo, sp.hi, w)
		if p == nil {
			return false
		}
		shape := []int64{int64(rows)}
		if f.Width > 1 {
			shape = append(shape, int64(f.Width))
		}
		if slot.AddArena(i, shm.RoleDense, shm.DType(f.DType), p, shape...) != nil {
			return false
		}
		b.arena.named(sp.b, b.rank, slot.Seq())
		return true
	}
	c := &sp.b.Columns[ci]
	if len(c.Offsets) <= sp.hi {
		return false
	}
	lo, hi := c.Offsets[sp.lo], c.Offsets[sp.hi]
	p := b.arena.data(sp.b, ci, int(lo), int(hi), es)
	if p == nil || slot.AddArena(i, shm.RoleValues, shm.DType(f.DType), p, hi-lo) != nil {
		return false
	}
	b.arena.named(sp.b, b.rank, slot.Seq())
	ob, e := slot.Add(i, shm.RoleOffsets, shm.DType(column.Int64), int64(rows+1))
	if e != nil {
		*err = e
		return true
	}
	offs := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(ob))), rows+1)
	for k, o := range c.Offsets[sp.lo : sp.hi+1] {
		offs[k] = o - lo
	}
	return true
}

// fillFixed packs fixed-width field i (column f.col of the spans) into
// the slot as a dense [rows] or [rows, width] array. With skip
// (Options.BenchSkipCopy) rows in order are left unwritten.
func fillFixed(slot *shm.Slot, i int, f *packField, spans []span, rows int, skip bool) error {
	shape := []int64{int64(rows)}
	if f.Width > 1 {
		shape = append(shape, int64(f.Width))
	}
	dst, err := slot.Add(i, shm.RoleDense, shm.DType(f.DType), shape...)
	if err != nil {
		return err
	}
	ci, w, off := f.col, f.DType.Size()*f.Width, 0
	for _, sp := range spans {
		if sp.from != nil {
			off += gatherFrom(dst[off:], &sp, ci, w)
			continue
		}
		if sp.idx == nil {
			if skip {
				off += (sp.hi - sp.lo) * w
				continue
			}
			off += copy(dst[off:], sp.b.Columns[ci].Data[sp.lo*w:sp.hi*w])
			continue
		}
		off += gatherRows(dst[off:], sp.b.Columns[ci].Data, sp.idx[sp.lo:sp.hi], w)
	}
	return nil
}

// fillList packs list or bytes field i into the slot as its values and
// rows+1 int64 offsets, rebased to start at 0. With skip
// (Options.BenchSkipCopy) the values of rows in order are left unwritten.
func fillList(slot *shm.Slot, i int, f *packField, spans []span, rows int, tmp *packScratch, skip bool) error {
	ci, dt, es := f.col, shm.DType(f.DType), f.DType.Size()
	if f.Kind == column.Bytes {
		dt = shm.DType(column.Uint8)
	}
	var v int64
	for _, sp := range spans {
		v += sp.values(ci)
	}
	vals, err := slot.Add(i, shm.RoleValues, dt, v)
	if err != nil {
		return err
	}
	ob, err := slot.Add(i, shm.RoleOffsets, shm.DType(column.Int64), int64(rows+1))
	if err != nil {
		return err
	}
	offs := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(ob))), rows+1)
	// The values written so far are always base of them: a row's go at
	// base*es.
	base, k, e := int64(0), 0, int64(es)
	offs[0] = 0
	for _, sp := range spans {
		if sp.from != nil {
			base, k = listFrom(vals, offs, ci, es, &sp, base, k, tmp)
			continue
		}
		c := &sp.b.Columns[ci]
		if sp.idx != nil {
			for _, r := range sp.idx[sp.lo:sp.hi] {
				lo, hi := c.Offsets[r], c.Offsets[r+1]
				copy(vals[base*e:], c.Data[lo*e:hi*e])
				base += hi - lo
				k++
				offs[k] = base
			}
			continue
		}
		lo, hi := c.Offsets[sp.lo], c.Offsets[sp.hi]
		if !skip {
			copy(vals[base*e:], c.Data[lo*e:hi*e])
		}
		for _, o := range c.Offsets[sp.lo+1 : sp.hi+1] {
			k++
			offs[k] = base + o - lo
		}
		base += hi - lo
	}
	return nil
}

// listFrom is fillList for a span over several batches, whose rows
// start at offs[k+1] and at value base: a source at a time, the rows'
// lengths, then their running sum, then each row's values to where the
// sum puts them. It returns the next base and k.
func listFrom(vals []byte, offs []int64, ci, es int, sp *span, base int64, k int, tmp *packScratch) (int64, int) {
	n := sp.hi - sp.lo
	ends := tmp.grow(n)
	for s, src := range sp.srcs {
		pos, o := sp.by.pos[s], src.Columns[ci].Offsets
		for q, r := range sp.by.rows[s] {
			ends[pos[q]] = o[r+1] - o[r]
		}
	}
	for q, l := range ends {
		base += l
		ends[q] = base
	}
	copy(offs[k+1:k+1+n], ends)
	tmp.midPack()
	e := int64(es)
	for s, src := range sp.srcs {
		pos, c := sp.by.pos[s], &src.Columns[ci]
		for q, r := range sp.by.rows[s] {
			lo, hi := c.Offsets[r], c.Offsets[r+1]
			at := (ends[pos[q]] - (hi - lo)) * e
			copy(vals[at:at+(hi-lo)*e], c.Data[lo*e:hi*e])
		}
	}
	return base, k + n
}

// packScratch is heap memory the packers compute in. They never read back
// what they wrote to a slot: a hand-over may swap the slot's mapping for
// private zeros at any moment (shm.Producer.Detach), and the old run would
// then read zeros where it wrote lengths.
type packScratch struct {
	ends, lens []int64
	rows       []byte // a stack's rows of one source (stackFrom)
	// mid, when set (tests), runs where a packer has written part of a
	// tensor and would once have read it back: a hand-over lands there.
	mid func()
}

func (t *packScratch) midPack() {
	if t.mid != nil {
		t.mid()
	}
}

// grow returns ends resized to n.
func (t *packScratch) grow(n int) []int64 {
	if cap(t.ends) < n {
		t.ends = make([]int64, n)
	}
	t.ends = t.ends[:n]
	return t.ends
}

// fillValidity packs the validity bytes of nullable field i (column ci):
// 1 for every row of a span whose column has no nulls.
func fillValidity(slot *shm.Slot, i, ci int, spans []span, rows int) error {
	dst, err := slot.Add(i, shm.RoleValidity, shm.DType(column.Uint8), int64(rows))
	if err != nil {
		return err
	}
	off := 0
	for _, sp := range spans {
		if sp.from != nil {
			d := dst[off : off+sp.hi-sp.lo]
			for s, src := range sp.srcs {
				pos, rows, v := sp.by.pos[s], sp.by.rows[s], src.Columns[ci].Valid
				for k, r := range rows {
					if v == nil {
						d[pos[k]] = 1
					} else {
						d[pos[k]] = v[r]
					}
				}
			}
			off += len(d)
			continue
		}
		c := &sp.b.Columns[ci]
		if c.Valid != nil && sp.idx != nil {
			off += gatherRows(dst[off:], c.Valid, sp.idx[sp.lo:sp.hi], 1)
			continue
		}
		if c.Valid != nil {
			off += copy(dst[off:], c.Valid[sp.lo:sp.hi])
			continue
		}
		for j := sp.lo; j < sp.hi; j++ {
			dst[off] = 1
			off++
		}
	}
	return nil
}

// gatherFrom copies column ci's rows of w bytes of a span over several
// batches to the front of dst, a source at a time, and returns the bytes
// written.
func gatherFrom(dst []byte, sp *span, ci, w int) int {
	n := (sp.hi - sp.lo) * w
	dst = dst[:n]
	for s, src := range sp.srcs {
		pos, rows := sp.by.pos[s], sp.by.rows[s]
		data := src.Columns[ci].Data
		switch w {
		case 8:
			d, sd := u64s(dst), u64s(data)
			for k, r := range rows {
				d[pos[k]] = sd[r]
			}
		case 4:
			d, sd := u32s(dst), u32s(data)
			for k, r := range rows {
				d[pos[k]] = sd[r]
			}
		case 1:
			for k, r := range rows {
				dst[pos[k]] = data[r]
			}
		default:
			for k, r := range rows {
				p := int(pos[k]) * w
				copy(dst[p:p+w], data[int(r)*w:int(r+1)*w])
			}
		}
	}
	return n
}

func u64s(b []byte) []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)
}

func u32s(b []byte) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

// gatherRows copies the rows of w bytes of src listed in idx to the front
// of dst and returns the bytes written.
func gatherRows(dst, src []byte, idx []int32, w int) int {
	n := len(idx) * w
	dst = dst[:n]
	switch w {
	case 8:
		d := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(dst))), len(idx))
		s := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(src))), len(src)/8)
		for j, r := range idx {
			d[j] = s[r]
		}
	case 4:
		d := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(dst))), len(idx))
		s := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(src))), len(src)/4)
		for j, r := range idx {
			d[j] = s[r]
		}
	case 1:
		for j, r := range idx {
			dst[j] = src[r]
		}
	default:
		for j, r := range idx {
			copy(dst[j*w:(j+1)*w], src[int(r)*w:int(r+1)*w])
		}
	}
	return n
}
