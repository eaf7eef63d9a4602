package shm

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
)

// Slot is a batch being written in place into a ring slot. It is valid from
// Acquire until Publish succeeds or Discard is called. Set the row count,
// Add every tensor of the schema in order (§5.2: a dense field's tensor,
// or a ragged field's values then offsets, then a validity tensor for a
// nullable field), fill the returned regions, set the cursor, Publish.
type Slot struct {
	p    *Producer
	live bool // acquired, neither published nor discarded
	seq  uint64
	mem  []byte
	k    int   // tensors added so far
	next int64 // offset of the next payload
	used int64 // end of the last payload (or of the table)
	rows int
	pad  int  // SetPadRows
	set  bool // SetRows called
	cur  Cursor
	it   planIter
}

// Seq returns the batch's sequence number.
func (s *Slot) Seq() uint64 { return s.seq }

// Cap returns the slot size in bytes.
func (s *Slot) Cap() int64 { return int64(len(s.mem)) }

// Used returns the bytes filled so far from the slot's start (header,
// tensor table and payloads): after the last Add, what Publish will
// store as used_bytes and a copy of the batch must cover.
func (s *Slot) Used() int64 { return s.used }

// SetRows sets the batch's row count B. Call it before Add.
func (s *Slot) SetRows(n int) error {
	if n < 0 || uint64(n) > 1<<32-1 {
		return fmt.Errorf("ring %q: %d rows, want 0 to %d", s.p.name, n, uint32(1<<32-1))
	}
	if s.k > 0 {
		return fmt.Errorf("ring %q: SetRows after Add", s.p.name)
	}
	s.rows, s.set = n, true
	s.next = s.p.layout(n).varStart
	return nil
}

// SetCursor sets the batch's cursor (§5.1).
func (s *Slot) SetCursor(c Cursor) { s.cur = c }

// SetPadRows says that the batch's last n rows are padding (pad_rows,
// §5.1): rows repeated to fill it, which a trainer leaves out of its loss
// and metrics. Publish sets FlagPadded in the batch flags exactly when n
// is not 0. n must be at most the batch's row count (checked at Publish).
func (s *Slot) SetPadRows(n int) error {
	if n < 0 || uint64(n) > 1<<32-1 {
		return fmt.Errorf("ring %q: %d padding rows, want 0 to %d", s.p.name, n, uint32(1<<32-1))
	}
	s.pad = n
	return nil
}

// Add appends the next tensor of the batch's table and returns its payload
// region in the slot, 256-byte aligned, for the caller to fill completely
// (it holds whatever an earlier batch left). field and role must be the
// next ones the schema calls for, dtype the field's (int64 for offsets,
// uint8 for validity), and shape the tensor's dimensions: [B, dims...] for
// a dense field, [V] for values, [B+1] for offsets ([K*B+1] for a jagged
// field of K keys), [K*B] for lengths, [B] for validity.
//
// If the tensor does not fit, Add returns a *TooLargeError and writes
// nothing; use Producer.Need to check a whole batch before acquiring.
func (s *Slot) Add(field int, role Role, dtype DType, shape ...int64) ([]byte, error) {
	p := s.p
	if !s.live {
		return nil, fmt.Errorf("ring %q: Add on a slot that was published, discarded or closed", p.name)
	}
	if !s.set {
		return nil, fmt.Errorf("ring %q: SetRows before Add", p.name)
	}
	if s.k >= p.tensorCount {
		return nil, fmt.Errorf("ring %q: batch already has all %d tensors", p.name, p.tensorCount)
	}
	save := s.it
	wantField, wantRole, _ := s.it.next()
	f := &p.fields[wantField]
	if field != wantField || role != wantRole {
		s.it = save
		return nil, fmt.Errorf("ring %q: tensor %d must be field %d (%q) role %v, got field %d role %v",
			p.name, s.k, wantField, f.Name, wantRole, field, role)
	}
	n, err := checkShape(f, role, dtype, shape)
	if err != nil {
		s.it = save
		return nil, fmt.Errorf("ring %q: field %q %v tensor: %w", p.name, f.Name, role, err)
	}
	var off int64
	if variable(role) {
		off = s.next
	} else {
		// Every tensor whose size follows from the row count has a fixed
		// place (payloadLayout); a leading dimension other than B would not
		// fit it, and is the error Publish would report anyway.
		lay := p.layout(s.rows)
		if n != lay.size[s.k] {
			s.it = save
			return nil, fmt.Errorf("ring %q: field %q %v tensor: shape %s does not match the batch's %d rows",
				p.name, f.Name, role, shapeString(shape), s.rows)
		}
		off = lay.off[s.k]
	}
	end := off + n
	if end > int64(len(s.mem)) {
		s.it = save
		return nil, &TooLargeError{Ring: p.name, Need: end, SlotSize: int64(len(s.mem))}
	}
	s.entry(field, role, dtype, shape, placeSlot, off, n)
	s.used = max(s.used, end)
	if variable(role) {
		s.next = alignUp(end, PayloadAlign)
	}
	return s.mem[off:end:end], nil
}

// entry writes the next tensor table entry (§5.2, §8.2) and counts it.
func (s *Slot) entry(field int, role Role, dtype DType, shape []int64, place byte, off, n int64) {
	e := s.mem[slotHeaderSize+s.k*tensorEntrySize : slotHeaderSize+(s.k+1)*tensorEntrySize]
	le := binary.LittleEndian
	le.PutUint16(e[tensorOffField:], uint16(field))
	e[tensorOffRole] = byte(role)
	e[tensorOffDType] = byte(dtype)
	e[tensorOffNDim] = byte(len(shape))
	clear(e[5:8])
	e[tensorOffPlace] = place
	for j := 0; j < maxTensorDims; j++ {
		var d int64
		if j < len(shape) {
			d = shape[j]
		}
		le.PutUint64(e[tensorOffShape+8*j:], uint64(d))
	}
	le.PutUint64(e[tensorOffOffset:], uint64(off))
	le.PutUint64(e[tensorOffNBytes:], uint64(n))
	clear(e[56:64])
	s.k++
}

// AddTensor is Add followed by a copy of data into the region; data must
// be exactly the tensor's size.
func (s *Slot) AddTensor(field int, role Role, dtype DType, data []byte, shape ...int64) error {
	if field >= 0 && field < len(s.p.fields) {
		f := &s.p.fields[field]
		if n, err := checkShape(f, role, dtype, shape); err == nil && n != int64(len(data)) {
			return fmt.Errorf("ring %q: field %q %v tensor: %d bytes of data for shape %v of %v (%d bytes)",
				s.p.name, f.Name, role, len(data), shapeString(shape), dtype, n)
		}
	}
	dst, err := s.Add(field, role, dtype, shape...)
	if err != nil {
		return err
	}
	copy(dst, data)
	return nil
}

// checkShape checks a tensor against its field and returns its byte size.
// The leading dimension is checked against the row count at Publish.
func checkShape(f *Field, role Role, dtype DType, shape []int64) (int64, error) {
	if want := roleDType(f, role); dtype != want {
		return 0, fmt.Errorf("dtype %v, want %v", dtype, want)
	}
	want := 1
	if role == RoleDense {
		want = 1 + len(f.Dims)
	}
	if len(shape) != want {
		return 0, fmt.Errorf("shape %s has %d dimensions, want %d", shapeString(shape), len(shape), want)
	}
	if role == RoleDense {
		for j, d := range f.Dims {
			if shape[1+j] != d {
				return 0, fmt.Errorf("shape %s, want trailing dimensions %v", shapeString(shape), f.Dims)
			}
		}
	}
	n := uint64(dtype.Size())
	for _, d := range shape {
		if d < 0 || d > maxSlotSize {
			return 0, fmt.Errorf("shape %s: dimension %d out of range", shapeString(shape), d)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > maxFileSize {
			return 0, fmt.Errorf("shape %s is too large", shapeString(shape))
		}
		n = lo
	}
	return int64(n), nil
}

// shapeString formats a shape like fmt's %v without letting the slice
// escape, so that Add's variadic shape stays on the caller's stack.
func shapeString(shape []int64) string {
	b := []byte{'['}
	for i, d := range shape {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, d, 10)
	}
	return string(append(b, ']'))
}
