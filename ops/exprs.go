package ops

import (
	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/expr"
)

// exprRef is a compiled expression and the values it reads: the names it
// knows them by (the schema at its op) and their value ids.
type exprRef struct {
	e       *expr.Expr
	src     string
	names   []string
	vids    []int
	nonNull []bool       // the schema says not null (after nulls: skip or error)
	filled  []bool       // read through a nulls fill that kept the value (entry.filled)
	view    column.Batch // the columns handed to the expression
	hits    []int32      // Filter's result over every row
	out     []int32
}

func (r *exprRef) clone() *exprRef {
	if r == nil {
		return nil
	}
	return &exprRef{e: r.e.Clone(), src: r.src, names: r.names, vids: r.vids, nonNull: r.nonNull, filled: r.filled}
}

// batch returns the frame's values the expression reads, under the names
// it knows them by. Columns the schema says are not null are handed over
// without validity: their null rows are dropped or fail later.
func (r *exprRef) batch(f *frame) *column.Batch {
	r.view.Rows = f.rows
	r.view.Columns = r.view.Columns[:0]
	for i, v := range r.vids {
		c := *f.vals[v]
		c.Name = r.names[i]
		if r.nonNull[i] {
			c.Valid = nil
		}
		r.view.Columns = append(r.view.Columns, c)
	}
	return &r.view
}

// eval computes the expression for every row of f into dst.
func (r *exprRef) eval(f *frame, dst *column.Column) error {
	return r.e.Eval(r.batch(f), dst)
}

// filter returns the rows of sel (nil: every row) where the expression is
// true, in a buffer of r's. The expression runs over every row of f;
// callers compact f first when sel is much shorter.
func (r *exprRef) filter(f *frame, sel []int32) ([]int32, error) {
	hits, err := r.e.Filter(r.batch(f), r.hits)
	r.hits = hits
	if err != nil || sel == nil {
		return hits, err
	}
	r.out = intersect(r.out[:0], hits, sel)
	return r.out, nil
}

// intersect appends to dst the rows in both a and b, both sorted.
func intersect(dst, a, b []int32) []int32 {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			dst = append(dst, a[i])
			i++
			j++
		}
	}
	return dst
}
