package ops

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/spec"
)

// stepBase is what every step has: its op, the values it reads and those
// it computes.
type stepBase struct {
	op     *spec.Op
	what   string // e.g. the column computed, for String and errors
	reads  []int
	writes []int
	dense  bool // evaluates expressions over every row of the frame
}

func (s *stepBase) base() *stepBase { return s }

// A step is one runtime action of an op. An op compiles to one or more
// steps: a sequence op with on_long: skip to a computer (the shaping) and
// a dropper (the rows too long).
type step interface {
	base() *stepBase
	// clone returns a copy for one State: expressions cloned, scratch
	// buffers its own.
	clone() step
}

// computer computes its values (base().writes) over every row of f.
type computer interface {
	step
	compute(f *frame) error
}

// dropper decides which rows survive: it returns the rows of sel (nil:
// every row of f) it keeps, in order, in a buffer of its own or in sel's,
// which it may overwrite.
type dropper interface {
	step
	drop(f *frame, sel []int32) ([]int32, error)
	// optional reports whether the drop may run in Apply instead of
	// Select (nulls: skip, on_long: skip), because deciding it early would
	// mean decoding heavy columns for every row.
	optional() bool
}

// checker fails on rows of sel that break a policy (nulls: error,
// on_long: error).
type checker interface {
	step
	check(f *frame, sel []int32) error
}

// DataError is a problem with the data, found while running an op: a null
// under nulls: error, a sequence over its length under on_long: error, a
// list element a cast cannot convert. The engine adds the file and row
// group. (A batch that lacks a column the program needs is the caller's
// bug, reported as a plain error.)
type DataError struct {
	Field  string // the op, "pipeline[3].nulls"
	Line   int    // the op's line in the spec
	Column string
	Msg    string
}

func (e *DataError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("%s (line %d): %s", e.Field, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s (line %d): column %q: %s", e.Field, e.Line, e.Column, e.Msg)
}

func dataErr(op *spec.Op, col, format string, args ...any) *DataError {
	return &DataError{Field: op.Path + "." + op.Kind, Line: op.Line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

// noRows is an empty selection; a nil one means every row.
var noRows = []int32{}

// drop runs d, making sure that keeping no row is not mistaken for
// keeping every row.
func drop(d dropper, f *frame, sel []int32) ([]int32, error) {
	out, err := d.drop(f, sel)
	if out == nil && err == nil {
		out = noRows
	}
	return out, err
}

// frame holds the values of one Select or Apply call, by value id.
type frame struct {
	rows  int
	vals  []*column.Column // nil until computed or bound to an input
	own   []column.Column  // the State's buffers for computed values
	home  []int            // Apply: value → output position (-1: none)
	out   *column.Batch    // Apply: the output batch
	apply bool             // in Apply, whose input batch is the steps' to consume
}

// dst returns the column a step computes value vid into: its output
// column in Apply when it is an output, else the State's own buffer.
func (f *frame) dst(vid int) *column.Column {
	var c *column.Column
	if f.home != nil && f.home[vid] >= 0 {
		c = &f.out.Columns[f.home[vid]]
	} else {
		c = &f.own[vid]
	}
	f.vals[vid] = c
	return c
}

func (f *frame) reset(rows int) {
	f.rows = rows
	clear(f.vals)
	f.home, f.out, f.apply = nil, nil, false
}

// State is one worker's scratch for running a Program: cloned expressions
// and buffers reused from unit to unit. It must not be shared between
// goroutines; NewState makes one per worker.
type State struct {
	p     *Program
	steps []step
	f     frame
	gath  []column.Column // Select: values gathered to the surviving rows
	sel   []int32
	base  []int32
	res   []int32

	// Select's drops in the order they run, when the program lets them be
	// reordered (see reorder), and what they cost so far.
	order []int
	stats []dropStats // by step index
	calls int

	quiet bool // OpRows not counted (CountRows)
}

// dropStats is what one drop of Select cost: rows in, rows kept, time.
type dropStats struct {
	in, out, ns int64
}

// bind points the frame's input values at b's columns.
func (s *State) bind(b *column.Batch, vids []int) error {
	for _, v := range vids {
		name := s.p.vals[v].input
		c := b.Col(name)
		if c == nil {
			return fmt.Errorf("ops: the batch has no column %q (want every column of Needs, Early for Select)", name)
		}
		if c.Len != b.Rows {
			return fmt.Errorf("ops: column %q has %d rows, the batch %d", name, c.Len, b.Rows)
		}
		s.f.vals[v] = c
	}
	return nil
}

// Select runs the row-dropping ops that run early (filter, sample, semi
// and anti joins, and nulls: skip or on_long: skip where their columns are
// early anyway), with the maps and casts they depend on, over the rows sel
// of b (nil: every row). b must hold every Early column for all its rows;
// Select does not change it. The result lists the surviving rows, sorted
// (never nil, even when empty); it is owned by s and valid until the next
// Select.
func (s *State) Select(b *column.Batch, sel []int32) ([]int32, error) {
	f := &s.f
	f.reset(b.Rows)
	if err := s.bind(b, s.p.selectIn); err != nil {
		return nil, err
	}
	var cur []int32
	if sel != nil {
		s.sel = append(s.sel[:0], sel...)
		cur = s.sel
		if cur == nil {
			cur = noRows
		}
	}
	s.base = s.base[:0]
	compacted := false
	steps := s.p.selectSteps
	if s.order != nil {
		steps = s.order
	}
	for _, i := range steps {
		if cur != nil && len(cur) == 0 {
			break
		}
		var err error
		switch st := s.steps[i].(type) {
		case dropper:
			if st.base().dense && cur != nil && 2*len(cur) < f.rows {
				s.compact(cur, compacted)
				compacted, cur = true, nil
			}
			if s.order == nil {
				cur, err = s.dropCounted(i, f, cur)
				break
			}
			in, t := len(cur), time.Now()
			if cur == nil {
				in = f.rows
			}
			cur, err = s.dropCounted(i, f, cur)
			d := &s.stats[i]
			d.in, d.out, d.ns = d.in+int64(in), d.out+int64(len(cur)), d.ns+int64(time.Since(t))
		case computer:
			// Computing for dropped rows is harmless; gather first only
			// when that saves most of the work.
			if cur != nil && 2*len(cur) < f.rows {
				s.compact(cur, compacted)
				compacted, cur = true, nil
			}
			err = st.compute(f)
		}
		if err != nil {
			return nil, err
		}
	}
	if s.order != nil {
		s.reorder()
	}
	// Map cur (rows of the frame) back to rows of b.
	switch {
	case !compacted && cur == nil:
		s.res = s.res[:0]
		for r := range b.Rows {
			s.res = append(s.res, int32(r))
		}
	case !compacted:
		s.res = append(s.res[:0], cur...)
	case cur == nil:
		s.res = append(s.res[:0], s.base...)
	default:
		s.res = s.res[:0]
		for _, r := range cur {
			s.res = append(s.res, s.base[r])
		}
	}
	if s.res == nil {
		return noRows, nil // never nil: to a decoder, nil means every row
	}
	return s.res, nil
}

// reorder sorts Select's drops so that those that drop the most rows per
// nanosecond go first: a drop that costs c per row and keeps a fraction p
// of them is worth running before the others in order of c / (1 - p).
// Every drop decides on its row alone, so their order changes what they
// cost, never which rows survive. The figures decay, so the order follows
// the data.
func (s *State) reorder() {
	s.calls++
	if s.calls%4 != 0 {
		return
	}
	rank := func(i int) float64 {
		d := s.stats[i]
		if d.in == 0 {
			return 0 // never ran (an earlier drop left no rows): try it early
		}
		return float64(d.ns) / float64(d.in) / max(1-float64(d.out)/float64(d.in), 1e-3)
	}
	slices.SortStableFunc(s.order, func(a, b int) int { return cmp.Compare(rank(a), rank(b)) })
	if s.calls%64 == 0 {
		for i := range s.stats {
			s.stats[i] = dropStats{s.stats[i].in / 2, s.stats[i].out / 2, s.stats[i].ns / 2}
		}
	}
}

// compact narrows every value the frame holds to the rows sel, so that
// the computing steps that follow work on survivors only.
func (s *State) compact(sel []int32, again bool) {
	f := &s.f
	for v, c := range f.vals {
		if c == nil {
			continue
		}
		if c == &f.own[v] || c == &s.gath[v] {
			compactColumn(c, sel)
			continue
		}
		gatherColumn(&s.gath[v], c, sel)
		f.vals[v] = &s.gath[v]
	}
	if !again {
		s.base = append(s.base[:0], sel...)
	} else {
		for j, r := range sel {
			s.base[j] = s.base[r]
		}
		s.base = s.base[:len(sel)]
	}
	f.rows = len(sel)
}

// Apply computes the output batch from b, which holds every Needs column
// for exactly the rows Select kept, in order. It runs the drops left for
// it (nulls: skip or on_long: skip over columns decoded late), the maps,
// casts, sequences, left joins, sample weights, nulls fills and
// projections, and the checks (nulls: error, on_long: error) on the rows
// it keeps; out may therefore have fewer rows than b.
//
// Apply consumes b: columns that pass through unchanged move into out
// without a copy, b getting out's old buffers in exchange, so afterwards
// b's contents are unspecified but its buffers remain valid for decoding
// the next unit. out's buffers are reused.
func (s *State) Apply(b *column.Batch, out *column.Batch) error {
	p := s.p
	f := &s.f
	f.reset(b.Rows)
	if err := s.bind(b, p.applyIn); err != nil {
		return err
	}
	if cap(out.Columns) < len(p.outputs) {
		out.Columns = append(out.Columns[:cap(out.Columns)], make([]column.Column, len(p.outputs)-cap(out.Columns))...)
	}
	out.Columns = out.Columns[:len(p.outputs)]
	f.home, f.out, f.apply = p.home, out, true
	// Drops that read input columns only go first, and the inputs are cut
	// to the rows they keep, so that nothing is computed for rows that
	// would be thrown away.
	var sel []int32
	for _, i := range p.preDrops {
		var err error
		if sel, err = s.dropCounted(i, f, sel); err != nil {
			return err
		}
	}
	if sel != nil && len(sel) < f.rows {
		for _, v := range p.applyIn {
			compactColumn(f.vals[v], sel)
		}
		f.rows = len(sel)
	}
	sel = nil
	for _, i := range p.applySteps {
		if err := s.steps[i].(computer).compute(f); err != nil {
			return err
		}
	}
	for _, i := range p.lateDrops {
		var err error
		if sel, err = s.dropCounted(i, f, sel); err != nil {
			return err
		}
	}
	for _, i := range p.checks {
		if err := s.steps[i].(checker).check(f, sel); err != nil {
			return err
		}
	}
	s.assemble(out, sel)
	return nil
}

// assemble moves the input columns that pass through into out, copies
// columns output twice, sets names and validity and drops the rows Apply's
// own drops removed.
func (s *State) assemble(out *column.Batch, sel []int32) {
	p, f := s.p, &s.f
	for pos, e := range p.outputs {
		if p.home[e.vid] != pos || p.vals[e.vid].producer >= 0 {
			continue
		}
		src, dst := f.vals[e.vid], &out.Columns[pos]
		dst.Data, src.Data = src.Data, dst.Data[:0]
		dst.Offsets, src.Offsets = src.Offsets, dst.Offsets[:0]
		dst.Valid, src.Valid = src.Valid, nil
		dst.Len, src.Len = src.Len, 0
		f.vals[e.vid] = dst
	}
	for pos, e := range p.outputs {
		if h := p.home[e.vid]; h != pos {
			copyColumn(&out.Columns[pos], &out.Columns[h])
		}
	}
	for pos, e := range p.outputs {
		c, o := &out.Columns[pos], &p.out[pos]
		c.Name, c.Kind, c.DType, c.Width = o.Name, o.Kind, o.DType, o.Width
		if !e.nullable {
			c.Valid = nil
		}
		if sel != nil {
			compactColumn(c, sel)
		}
	}
	out.Rows = f.rows
	if sel != nil {
		out.Rows = len(sel)
	}
}
