package ops

import (
	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/spec"
)

// sequence: shape a list column. With a length, every row becomes exactly
// length elements of a [B, length] Fixed column: a longer row loses
// elements from its truncate side (left: the first ones, keeping the most
// recent), a shorter one gets pad_value on its pad_side. With length 0 the
// column stays ragged (values + offsets), cut to max_length when set. A
// null list is an empty one. on_long decides what a row longer than the
// limit gets: truncate, error (naming the length and the limit) or skip.

type seqShape struct {
	stepBase
	src, out, lens int // value ids; out or lens -1 when not computed
	length         int // Fixed output width; 0 for ragged
	limit          int // max elements kept per row; 0 for no limit
	keepLast       bool
	padLeft        bool
	pad            []byte // length elements of pad_value, as the dtype's bytes
	move           bool   // ragged: src may be taken over (see Program.plan)
}

// seqLimit is what on_long: skip and on_long: error share: the rows of a
// list column longer than a limit.
type seqLimit struct {
	stepBase
	src   int
	limit int
	which string // "length" or "max_length"
}

// seqLongDrop is on_long: skip.
type seqLongDrop struct {
	seqLimit
	out []int32
}

// seqLongCheck is on_long: error.
type seqLongCheck struct{ seqLimit }

func (c *compiler) sequence(op *spec.Op) error {
	s := op.Sequence
	e, why := c.groupLookup(s.Column)
	if e == nil {
		return c.errf(op, "column", "%s", why)
	}
	v := c.vals[e.vid]
	if v.kind != column.List || !isNumDType(v.dtype) {
		return c.errf(op, "column", "column %q is %s; sequence shapes list columns of numbers", s.Column, v.describe())
	}
	if err := c.checkName(op, "output", s.Output); err != nil {
		return err
	}
	if s.Lengths != "" {
		if err := c.checkName(op, "lengths", s.Lengths); err != nil {
			return err
		}
	}
	if s.Lengths != "" && s.Lengths == s.Output {
		return c.errf(op, "lengths", "the lengths column %q has the sequence's own name; name it differently", s.Lengths)
	}
	limit, which := s.Length, "length"
	if s.Length == 0 {
		limit, which = s.MaxLength, "max_length"
	}
	if s.MaxLength < 0 {
		return c.errf(op, "max_length", "want 0 (no bound) or more, got %d", s.MaxLength)
	}
	st := &seqShape{stepBase: stepBase{op: op, what: s.Output, reads: []int{e.vid}}, src: e.vid, out: -1, lens: -1,
		length: s.Length, limit: limit, keepLast: s.Truncate == "left", padLeft: s.PadSide == "left"}
	out := e.vid // ragged without a bound: the same values, nulls read as empty
	if limit > 0 {
		nv := value{kind: column.List, dtype: v.dtype, width: 1, producer: -1}
		if s.Length > 0 {
			nv.kind, nv.width = column.Fixed, s.Length
			pad, err := padBytes(v.dtype, s.PadValue, s.Length)
			if err != nil {
				return c.errf(op, "pad_value", "column %q: %v", s.Column, err)
			}
			st.pad = pad
		}
		out = c.addValue(nv)
		st.out = out
		st.writes = append(st.writes, out)
	}
	if s.Lengths != "" {
		st.lens = c.addValue(value{kind: column.Fixed, dtype: column.Int32, width: 1, producer: -1})
		st.writes = append(st.writes, st.lens)
	}
	if len(st.writes) > 0 {
		c.addStep(st)
	}
	switch s.OnLong {
	case "skip", "error":
		l := seqLimit{stepBase: stepBase{op: op, what: s.Column, reads: []int{e.vid}}, src: e.vid, limit: limit, which: which}
		if s.OnLong == "skip" {
			c.addStep(&seqLongDrop{seqLimit: l})
		} else {
			c.addStep(&seqLongCheck{l})
		}
	}
	c.setColumn(s.Output, out, false)
	if s.Lengths != "" {
		c.setColumn(s.Lengths, st.lens, false)
	}
	return nil
}

// padBytes encodes n copies of pad as dtype.
func padBytes(dt column.DType, pad spec.Number, n int) ([]byte, error) {
	one, err := elemBytes(dt, pad, "pad_value")
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, n*len(one))
	for range n {
		out = append(out, one...)
	}
	return out, nil
}

func (s *seqShape) clone() step { c := *s; return &c }

func (s *seqShape) compute(f *frame) error {
	src := f.vals[s.src]
	var lens []int32
	if s.lens >= 0 {
		l := f.dst(s.lens)
		l.Kind, l.DType, l.Width, l.Len, l.Offsets, l.Valid = column.Fixed, column.Int32, 1, f.rows, nil, nil
		l.Data = column.Grow(l.Data, 4*f.rows)
		lens = i32s(l.Data)
		off := src.Offsets
		for i := range lens {
			n := off[i+1] - off[i]
			if s.limit > 0 && n > int64(s.limit) {
				n = int64(s.limit)
			}
			lens[i] = int32(n)
		}
	}
	if s.out < 0 {
		return nil
	}
	dst := f.dst(s.out)
	if s.length > 0 {
		s.fixed(dst, src)
	} else {
		s.ragged(dst, src, s.move && f.apply)
	}
	return nil
}

// fixed pads or truncates every row of src into a [rows, length] dst.
func (s *seqShape) fixed(dst, src *column.Column) {
	es := src.DType.Size()
	L := s.length
	rowBytes := L * es
	dst.Kind, dst.DType, dst.Width, dst.Len, dst.Offsets, dst.Valid = column.Fixed, src.DType, L, src.Len, nil, nil
	dst.Data = column.Grow(dst.Data, src.Len*rowBytes)
	off, data, pad := src.Offsets, src.Data, s.pad
	zeroPad := true
	for _, b := range pad {
		zeroPad = zeroPad && b == 0
	}
	for i := range src.Len {
		lo, hi := off[i], off[i+1]
		n := int(hi - lo)
		if n > L {
			if s.keepLast {
				lo = hi - int64(L)
			}
			n = L
		}
		row := dst.Data[i*rowBytes : (i+1)*rowBytes]
		vals := data[int(lo)*es : (int(lo)+n)*es]
		p := rowBytes - len(vals)
		if s.padLeft {
			copy(row[p:], vals)
			row = row[:p]
		} else {
			copy(row, vals)
			row = row[len(vals):]
		}
		if zeroPad {
			clear(row)
		} else {
			copy(row, pad)
		}
	}
}

// ragged cuts the rows of src longer than the limit into dst. With move,
// src is an input column nothing reads afterwards: its buffers become
// dst's (src gets dst's old ones) and long rows are cut in place, so a
// unit without long rows costs nothing.
func (s *seqShape) ragged(dst, src *column.Column, move bool) {
	es := int64(src.DType.Size())
	lim := int64(s.limit)
	rows := src.Len
	dst.Kind, dst.DType, dst.Width, dst.Len, dst.Valid = column.List, src.DType, 1, rows, nil
	first := rows
	for i := range rows {
		if src.Offsets[i+1]-src.Offsets[i] > lim {
			first = i
			break
		}
	}
	var from []byte // where the values come from
	var off []int64 // the source offsets, overwritten in place when moving
	if move {
		dst.Data, src.Data = src.Data, dst.Data[:0]
		dst.Offsets, src.Offsets = src.Offsets, dst.Offsets[:0]
		src.Len = 0
		if first == rows {
			return
		}
		from, off = dst.Data, dst.Offsets
	} else {
		from, off = src.Data, src.Offsets
		dst.Offsets = growI64(dst.Offsets, rows+1)
		copy(dst.Offsets, off[:first+1])
		dst.Data = column.Grow(dst.Data, int(off[rows]*es)) // room for every value
		copy(dst.Data, from[:off[first]*es])
		if first == rows {
			return
		}
		dst.Data = dst.Data[:off[first]*es]
	}
	o := dst.Offsets
	n := off[first] // values written so far
	for i := first; i < rows; {
		lo, hi := off[i], off[i+1]
		if hi-lo > lim { // a long row: cut it
			if s.keepLast {
				lo = hi - lim
			} else {
				hi = lo + lim
			}
			dst.Data = append(dst.Data[:n*es], from[lo*es:hi*es]...)
			o[i] = n
			n += hi - lo
			i++
			continue
		}
		// A run of short rows moves in one copy. Offsets are read before
		// they are overwritten: o[k] is written after off[k] was read.
		j := i + 1
		for j < rows && off[j+1]-off[j] <= lim {
			j++
		}
		end := off[j]
		for k := i; k < j; k++ {
			o[k] = n + off[k] - lo
		}
		dst.Data = append(dst.Data[:n*es], from[lo*es:end*es]...)
		n += end - lo
		i = j
	}
	o[rows] = n
	dst.Offsets = o[:rows+1]
	dst.Data = dst.Data[:n*es]
}

func (s *seqLongDrop) clone() step { return &seqLongDrop{seqLimit: s.seqLimit} }

func (s *seqLongDrop) optional() bool { return true }

// drop keeps the rows no longer than the limit.
func (s *seqLongDrop) drop(f *frame, sel []int32) ([]int32, error) {
	off := f.vals[s.src].Offsets
	lim := int64(s.limit)
	s.out = s.out[:0]
	if sel == nil {
		for i := range f.rows {
			if off[i+1]-off[i] <= lim {
				s.out = append(s.out, int32(i))
			}
		}
		return s.out, nil
	}
	for _, i := range sel {
		if off[i+1]-off[i] <= lim {
			s.out = append(s.out, i)
		}
	}
	return s.out, nil
}

func (s *seqLongCheck) clone() step { c := *s; return &c }

func (s *seqLongCheck) check(f *frame, sel []int32) error {
	off := f.vals[s.src].Offsets
	lim := int64(s.limit)
	bad := func(i int) error {
		return dataErr(s.op, s.what, "a row has %d elements, over %s %d (on_long: error); raise %s or set on_long to truncate or skip",
			off[i+1]-off[i], s.which, s.limit, s.which)
	}
	if sel == nil {
		for i := range f.rows {
			if off[i+1]-off[i] > lim {
				return bad(i)
			}
		}
		return nil
	}
	for _, i := range sel {
		if off[i+1]-off[i] > lim {
			return bad(int(i))
		}
	}
	return nil
}
