package ops

import (
	"fmt"
	"strings"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/expr"
	"github.com/lastmile/lastmile/spec"
)

// map: each entry "name: expression" adds a column or replaces the one of
// that name. Entries see the columns as they were before the op (like SQL
// SELECT), so one map may swap two columns; a later op sees them all.

type mapStep struct {
	stepBase
	x *exprRef
}

func (c *compiler) mapOp(op *spec.Op) error {
	type result struct {
		name     string
		vid      int
		nullable bool
	}
	var results []result
	ee := entryErrs{c: c}
	for _, a := range op.Map {
		if err := c.checkName(op, a.Name, a.Name); err != nil {
			ee.add(err)
			continue
		}
		r, err := c.compileExpr(a.Value)
		if err != nil {
			msg := err.Error()
			for _, b := range op.Map {
				if b.Name != a.Name && c.index(b.Name) < 0 && strings.Contains(msg, fmt.Sprintf("%q", b.Name)) {
					msg += fmt.Sprintf("; %q is computed by this same map, and entries see only the columns before it: use it in a later map op", b.Name)
					break
				}
			}
			ee.add(c.errAt(op, a, "%s", msg))
			continue
		}
		t := r.e.Type()
		var kind column.Kind
		switch {
		case t.Kind == expr.String:
			kind = column.Bytes
		case t.Kind == expr.List || t.Kind.DType() == column.Invalid:
			ee.add(c.errAt(op, a, "%q gives a %s; a map computes one number, bool or string per row (shape lists with a sequence op)", a.Value, t))
			continue
		}
		vid := c.addValue(value{kind: kind, dtype: t.Kind.DType(), width: 1, nullable: t.Nullable, producer: -1, unit: r.e.Unit()}) // ts2: ts counts ts's unit
		c.addStep(&mapStep{stepBase: stepBase{op: op, what: a.Name, reads: r.vids, writes: []int{vid}}, x: r})
		results = append(results, result{a.Name, vid, t.Nullable})
	}
	if err := ee.err(); err != nil {
		return err
	}
	for _, r := range results {
		c.setColumn(r.name, r.vid, r.nullable)
	}
	return nil
}

func (s *mapStep) clone() step {
	c := *s
	c.x = s.x.clone()
	return &c
}

func (s *mapStep) compute(f *frame) error {
	if err := s.x.eval(f, f.dst(s.writes[0])); err != nil {
		return dataErr(s.op, s.what, "%q: %v", s.x.src, err)
	}
	return nil
}
