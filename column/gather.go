package column

import "fmt"

// GatherFrom sets b to rows drawn from several batches with the same
// columns (names, kinds, dtypes and widths): row j of b is row idx[j] of
// srcs[from[j]]. It reuses b's buffers, and goes a column at a time. A
// source without validity bytes counts as all valid; b has them when any
// source does.
func (b *Batch) GatherFrom(srcs []*Batch, from, idx []int32) {
	if len(from) != len(idx) {
		panic(fmt.Sprintf("BUG: GatherFrom: %d sources for %d rows", len(from), len(idx)))
	}
	if len(srcs) == 0 {
		b.Reset()
		return
	}
	n := len(srcs[0].Columns)
	if len(b.Columns) != n {
		b.Columns = make([]Column, n)
	}
	cols := make([]*Column, len(srcs))
	for i := range n {
		for s, src := range srcs {
			if len(src.Columns) != n {
				panic(fmt.Sprintf("BUG: GatherFrom: a source of %d columns among sources of %d", len(src.Columns), n))
			}
			cols[s] = &src.Columns[i]
		}
		b.Columns[i].gatherFrom(cols, from, idx)
	}
	b.Rows = len(idx)
}

func (c *Column) gatherFrom(srcs []*Column, from, idx []int32) {
	s0 := srcs[0]
	c.Name, c.Kind, c.DType, c.Width, c.Len = s0.Name, s0.Kind, s0.DType, s0.Width, len(idx)
	size := s0.DType.Size()
	if s0.Kind == Fixed {
		w := size * s0.Width
		c.Data = Grow(c.Data, len(idx)*w)
		for j, r := range idx {
			copy(c.Data[j*w:(j+1)*w], srcs[from[j]].Data[int(r)*w:int(r+1)*w])
		}
	} else {
		c.sizeOffsets(len(idx))
		var n int64
		for j, r := range idx {
			o := srcs[from[j]].Offsets
			n += o[r+1] - o[r]
			c.Offsets[j+1] = n
		}
		c.Data = Grow(c.Data, int(n)*size)
		es := int64(size)
		for j, r := range idx {
			s := srcs[from[j]]
			copy(c.Data[c.Offsets[j]*es:], s.Data[s.Offsets[r]*es:s.Offsets[r+1]*es])
		}
	}
	valid := false
	for _, s := range srcs {
		valid = valid || s.Valid != nil
	}
	if !valid {
		c.Valid = nil
		return
	}
	c.Valid = Grow(c.Valid, len(idx))
	for j, r := range idx {
		if v := srcs[from[j]].Valid; v != nil {
			c.Valid[j] = v[r]
		} else {
			c.Valid[j] = 1
		}
	}
}

// sizeOffsets makes c.Offsets n+1 long with a leading 0, reusing its
// buffer.
func (c *Column) sizeOffsets(n int) {
	if cap(c.Offsets) < n+1 {
		c.Offsets = make([]int64, n+1)
	}
	c.Offsets = c.Offsets[:n+1]
	c.Offsets[0] = 0
}
