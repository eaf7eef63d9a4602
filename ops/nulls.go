package ops

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/spec"
)

// nulls: what happens to the nulls of the listed columns (every nullable
// column when none are listed). fill replaces them with the fill value
// (numbers), an empty list or an empty string; skip drops their rows;
// error fails, naming the column. Afterwards the columns are not nullable.
// skip and error look only at the rows the pipeline would output, so a
// null in a row another op drops is no error.

type nullsFill struct {
	stepBase
	one []byte // the fill value as one element of the column's dtype
}

type nullsDrop struct {
	stepBase
	out []int32
}

type nullsCheck struct {
	stepBase
	names []string
}

func (c *compiler) nulls(op *spec.Op) error {
	n := op.Nulls
	var targets []int // schema positions of nullable columns
	if len(n.Columns) == 0 {
		for i, e := range c.schema {
			if e.nullable {
				targets = append(targets, i)
			}
		}
	} else {
		seen := map[string]bool{}
		ee := entryErrs{c: c}
		for _, name := range n.Columns {
			if seen[name] {
				ee.add(c.errf(op, "columns", "column %q listed twice", name))
				continue
			}
			seen[name] = true
			e, why := c.lookup(name)
			if e == nil {
				ee.add(c.errf(op, "columns", "%s", why))
				continue
			}
			if e.nullable {
				targets = append(targets, c.index(name))
			}
		}
		if err := ee.err(); err != nil {
			return err
		}
	}
	if len(targets) == 0 {
		return nil
	}
	var reads []int
	var names []string
	for _, i := range targets {
		reads = append(reads, c.schema[i].vid)
		names = append(names, c.schema[i].name)
	}
	switch n.Policy {
	case "skip":
		c.addStep(&nullsDrop{stepBase: stepBase{op: op, what: fmt.Sprint(names), reads: reads}})
	case "error":
		c.addStep(&nullsCheck{stepBase: stepBase{op: op, what: fmt.Sprint(names), reads: reads}, names: names})
	case "fill":
		for _, i := range targets {
			e := &c.schema[i]
			v := c.vals[e.vid]
			if v.kind != column.Fixed {
				e.filled = true
				continue // null lists and strings are empty already
			}
			one, err := fillBytes(v.dtype, n.Fill)
			if err != nil {
				return c.errf(op, "fill", "column %q: %v", e.name, err)
			}
			if allZero(one) {
				e.filled = true
				continue // null rows hold zeros already
			}
			vid := c.addValue(value{kind: v.kind, dtype: v.dtype, width: v.width, producer: -1, unit: v.unit}) // still a timestamp of its unit
			c.addStep(&nullsFill{stepBase: stepBase{op: op, what: e.name, reads: []int{e.vid}, writes: []int{vid}}, one: one})
			e.vid = vid
		}
	}
	for _, i := range targets {
		c.schema[i].nullable = false
	}
	return nil
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// fillBytes encodes the fill value as one element of dt, refusing values
// the dtype cannot hold.
func fillBytes(dt column.DType, num spec.Number) ([]byte, error) {
	return elemBytes(dt, num, "fill")
}

// elemBytes encodes num as one element of dt, refusing values the dtype
// cannot hold; what names the spec field in the error.
func elemBytes(dt column.DType, num spec.Number, what string) ([]byte, error) {
	f := num.F
	if dt == column.Bool {
		if f != 0 && f != 1 {
			return nil, fmt.Errorf("%s %v for a bool column; want 0 or 1", what, num)
		}
		return []byte{byte(f)}, nil
	}
	b := make([]byte, dt.Size())
	if isIntDType(dt) {
		v, ok := num.Whole()
		if !ok && (f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f)) {
			return nil, fmt.Errorf("%s %v for an integer (%v) column; want a whole number", what, num, dt)
		}
		lo, hi := intRange(dt)
		if !ok || v < lo || v > hi {
			return nil, fmt.Errorf("%s %v does not fit %v (%d to %d)", what, num, dt, lo, hi)
		}
		switch dt.Size() {
		case 1:
			b[0] = byte(v)
		case 2:
			binary.LittleEndian.PutUint16(b, uint16(v))
		case 4:
			binary.LittleEndian.PutUint32(b, uint32(v))
		case 8:
			binary.LittleEndian.PutUint64(b, uint64(v))
		}
		return b, nil
	}
	switch dt {
	case column.Float32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(f)))
	case column.Float64:
		binary.LittleEndian.PutUint64(b, math.Float64bits(f))
	case column.BFloat16:
		binary.LittleEndian.PutUint16(b, bf16(float32(f)))
	case column.Float16:
		binary.LittleEndian.PutUint16(b, f16(float32(f)))
	default:
		return nil, fmt.Errorf("%s for a %v column: only numbers and bools take one", what, dt)
	}
	return b, nil
}

func (s *nullsFill) clone() step { c := *s; return &c }

func (s *nullsFill) compute(f *frame) error {
	src := f.vals[s.reads[0]]
	dst := f.dst(s.writes[0])
	dst.Kind, dst.DType, dst.Width, dst.Len, dst.Offsets, dst.Valid = src.Kind, src.DType, src.Width, src.Len, nil, nil
	dst.Data = append(dst.Data[:0], src.Data...)
	if src.Valid == nil {
		return nil
	}
	es := len(s.one)
	w := es * src.Width
	switch {
	case w == 4 && es == 4:
		d, v := u32s(dst.Data), *(*uint32)(unsafePtr(s.one))
		for i, ok := range src.Valid[:src.Len] {
			if ok == 0 {
				d[i] = v
			}
		}
	case w == 8 && es == 8:
		d, v := u64s(dst.Data), *(*uint64)(unsafePtr(s.one))
		for i, ok := range src.Valid[:src.Len] {
			if ok == 0 {
				d[i] = v
			}
		}
	default:
		for i, ok := range src.Valid[:src.Len] {
			if ok == 0 {
				for k := i * w; k < (i+1)*w; k += es {
					copy(dst.Data[k:k+es], s.one)
				}
			}
		}
	}
	return nil
}

func (s *nullsDrop) clone() step { return &nullsDrop{stepBase: s.stepBase} }

func (s *nullsDrop) optional() bool { return true }

// drop keeps the rows of sel where every column is valid.
func (s *nullsDrop) drop(f *frame, sel []int32) ([]int32, error) {
	if sel == nil {
		sel = iota32(s.out, f.rows)
	} else {
		sel = append(s.out[:0], sel...)
	}
	for _, v := range s.reads {
		valid := f.vals[v].Valid
		if valid == nil {
			continue
		}
		n := 0
		for _, i := range sel {
			if valid[i] != 0 {
				sel[n] = i
				n++
			}
		}
		sel = sel[:n]
	}
	s.out = sel
	return sel, nil
}

func (s *nullsCheck) clone() step { c := *s; return &c }

func (s *nullsCheck) check(f *frame, sel []int32) error {
	for k, v := range s.reads {
		valid := f.vals[v].Valid
		if valid == nil {
			continue
		}
		bad := false
		if sel == nil {
			for _, ok := range valid[:f.rows] {
				bad = bad || ok == 0
			}
		} else {
			for _, i := range sel {
				bad = bad || valid[i] == 0
			}
		}
		if bad {
			return dataErr(s.op, s.names[k], "a row is null, and nulls: error forbids it; use policy fill or skip, or fix the data")
		}
	}
	return nil
}

// intRange is the range of an integer dtype's values.
func intRange(dt column.DType) (lo, hi int64) {
	switch dt {
	case column.Int8:
		return math.MinInt8, math.MaxInt8
	case column.Uint8:
		return 0, math.MaxUint8
	case column.Int16:
		return math.MinInt16, math.MaxInt16
	case column.Int32:
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}
