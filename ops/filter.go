package ops

import (
	"github.com/lastmile/lastmile/expr"
	"github.com/lastmile/lastmile/spec"
)

// filter: keep the rows where a boolean expression is true (null is
// false). Always runs in Select.

type filterStep struct {
	stepBase
	x *exprRef
}

func (c *compiler) filter(op *spec.Op) error {
	r, err := c.compileExpr(op.Filter.Expr)
	if err != nil {
		return c.errf(op, "", "%v", err)
	}
	if t := r.e.Type(); t.Kind != expr.Bool {
		return c.errf(op, "", "want a boolean expression, %q is %s (compare it: x != 0)", op.Filter.Expr, t)
	}
	c.addStep(&filterStep{stepBase: stepBase{op: op, what: op.Filter.Expr, reads: r.vids, dense: true}, x: r})
	return nil
}

func (s *filterStep) clone() step {
	c := *s
	c.x = s.x.clone()
	return &c
}

func (s *filterStep) optional() bool { return false }

func (s *filterStep) drop(f *frame, sel []int32) ([]int32, error) {
	out, err := s.x.filter(f, sel)
	if err != nil {
		return nil, dataErr(s.op, "", "filter %q: %v", s.x.src, err)
	}
	return out, nil
}

// mayMatch asks the expression whether a row group with the given input
// statistics may hold a row it keeps. Columns computed by earlier ops have
// no statistics.
func (s *filterStep) mayMatch(p *Program, stats func(string) (expr.Range, bool)) bool {
	return s.x.e.MayMatch(func(name string) (expr.Range, bool) {
		for i, n := range s.x.names {
			if n == name {
				if v := &p.vals[s.x.vids[i]]; v.producer < 0 {
					r, ok := stats(v.input)
					if ok && s.x.filled[i] {
						r = filledRange(r)
					}
					return r, ok
				}
				break
			}
		}
		return expr.Range{}, false
	})
}

// filledRange is r, the statistics of an input column, as they stand
// after a nulls fill that kept the column's values: its null rows read
// as 0 (numbers and bools) or "" (strings) now, so the bounds take in
// that value and no row is null.
func filledRange(r expr.Range) expr.Range {
	if r.NullCount == 0 {
		return r
	}
	switch {
	case r.HasBounds:
		r.Min, r.Max, r.MinString = min(r.Min, 0), max(r.Max, 0), ""
	case r.NullCount > 0 && r.NullCount >= r.Rows:
		// Every row was null: every row holds the fill.
		r.HasBounds, r.Min, r.Max, r.MinString, r.MaxString = true, 0, 0, "", ""
	}
	r.NullCount = 0
	return r
}
