package ops

import "sync/atomic"

// opRows counts, for one row-dropping step, the rows that reached it and
// those it kept, over every worker's State.
type opRows struct {
	in, out atomic.Int64
}

// OpRows is what a row-dropping op (filter, sample, a semi or anti join,
// nulls: skip, on_long: skip) did so far: rows In reached it, Out of them
// it kept. Out/In is its keep rate: a sample's rate, a filter's
// selectivity. Where Select reorders its drops, each counts the rows that
// reached it in the order they ran. Units skipped unread (their row group
// statistics fail a filter) and units computed elsewhere (a CPU peer, the
// unit cache) are not counted.
type OpRows struct {
	Op      string // the op's field and kind: "pipeline[2].sample"
	Line    int    // its line in the spec
	In, Out int64
}

// OpRows returns the counts of the program's row-dropping ops, in spec
// order. It may be called while workers run.
func (p *Program) OpRows() []OpRows {
	var out []OpRows
	for i, st := range p.steps {
		if _, ok := st.(dropper); !ok {
			continue
		}
		op := st.base().op
		r := &p.rows[i]
		out = append(out, OpRows{Op: op.Path + "." + op.Kind, Line: op.Line, In: r.in.Load(), Out: r.out.Load()})
	}
	return out
}

// CountRows turns the counting of OpRows on (the default) or off for
// this State: off while it only counts the rows a unit would yield, for a
// resume, so that those rows are not counted twice.
func (s *State) CountRows(on bool) { s.quiet = !on }

// dropCounted runs drop step i over the rows cur of f (nil: all) and
// counts the rows in and out.
func (s *State) dropCounted(i int, f *frame, cur []int32) ([]int32, error) {
	in := len(cur)
	if cur == nil {
		in = f.rows
	}
	out, err := drop(s.steps[i].(dropper), f, cur)
	if err == nil && !s.quiet {
		r := &s.p.rows[i]
		r.in.Add(int64(in))
		r.out.Add(int64(len(out)))
	}
	return out, err
}
