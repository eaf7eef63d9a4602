package ops

import (
	"fmt"

	"github.com/lastmile/lastmile/spec"
)

// select, rename and drop change the schema only: they compile to no step
// at all. Columns they remove are not decoded unless an op reads them
// (projection pushdown), and a column that reaches the output unchanged
// moves from the decoded batch into the output without a copy.

// selectOp keeps the listed columns, in the listed order. Every listed
// column that is not there is an error; the others are kept all the same,
// so that the ops after it are checked against the schema meant.
func (c *compiler) selectOp(op *spec.Op) error {
	seen := map[string]bool{}
	out := make([]entry, 0, len(op.Select))
	var errs spec.Errors
	for i, name := range op.Select {
		if seen[name] {
			errs = append(errs, c.errIdx(op, i, "column %q listed twice", name))
			continue
		}
		seen[name] = true
		if c.index(name) < 0 && c.unsure[name] {
			continue // an earlier error
		}
		e, why := c.lookup(name)
		if e == nil {
			errs = append(errs, c.errIdx(op, i, "%s", why))
			continue
		}
		out = append(out, *e)
	}
	for _, e := range c.schema {
		if !seen[e.name] {
			c.gone[e.name] = fmt.Sprintf("was left out by the select at line %d", op.Line)
		}
	}
	c.schema = out
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// rename renames columns, all at once: {a: b, b: a} swaps two.
func (c *compiler) rename(op *spec.Op) error {
	from := map[string]bool{}
	for _, a := range op.Rename {
		if _, why := c.lookup(a.Name); why != "" {
			return c.errAt(op, a, "%s", why)
		}
		from[a.Name] = true
	}
	to := map[string]bool{}
	for _, a := range op.Rename {
		if err := c.checkName(op, a.Name, a.Value); err != nil {
			return err
		}
		if to[a.Value] {
			return c.errAt(op, a, "two columns renamed to %q", a.Value)
		}
		to[a.Value] = true
		if c.index(a.Value) >= 0 && !from[a.Value] {
			return c.errAt(op, a, "column %q exists already; drop it first or pick another name", a.Value)
		}
	}
	for _, a := range op.Rename {
		i := c.index(a.Name)
		defer func(i int, name string) { c.schema[i].name = name }(i, a.Value)
		if !to[a.Name] {
			c.gone[a.Name] = fmt.Sprintf("was renamed to %q at line %d", a.Value, a.Line)
		}
		delete(c.gone, a.Value)
	}
	return nil
}

// drop removes the listed columns.
func (c *compiler) drop(op *spec.Op) error {
	ee := entryErrs{c: c}
	for i, name := range op.Drop {
		j := c.index(name)
		if j < 0 {
			ee.add(c.errIdx(op, i, "%s", c.missing(name)))
			continue
		}
		c.schema = append(c.schema[:j], c.schema[j+1:]...)
		c.gone[name] = fmt.Sprintf("was dropped at line %d", op.Line)
	}
	return ee.err()
}
