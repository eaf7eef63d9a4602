package ops

import (
	"context"
	"errors"
	"fmt"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/spec"
)

// join: a map-side join against a side table that Compile loads once.
// semi keeps the rows whose key is in the table, anti those whose key is
// not (both run in Select); left keeps every row and adds the table's
// columns, null where no table row matches (runs in Apply). A null key
// matches nothing.

type joinDrop struct {
	stepBase
	t    *sideTable
	use  bucketUse
	key  int
	anti bool
	idx  []int32
	out  []int32
}

type joinLeft struct {
	stepBase
	t   *sideTable
	use bucketUse
	key int
	idx []int32
}

func (c *compiler) join(ctx context.Context, op *spec.Op) error {
	jn := op.Join
	e, why := c.groupLookup(jn.On)
	if e == nil {
		return c.errf(op, "on", "%s", why)
	}
	kv := c.vals[e.vid]
	rowInt, ok := keyKind(kv.kind, kv.dtype, kv.width)
	if !ok {
		return c.errf(op, "on", "column %q is %s; a join key must be an integer or string column", jn.On, kv.describe())
	}
	cols := []string{jn.TableKey}
	plan, layout, err := planTable(ctx, c.env.FS, jn.Table, cols)
	if err != nil {
		return c.tableErr(ctx, op, "table_key", err)
	}
	if len(jn.Columns) > 0 {
		seen := map[string]bool{}
		for _, name := range jn.Columns {
			if seen[name] {
				return c.errf(op, "columns", "column %q listed twice", name)
			}
			seen[name] = true
		}
		cols = append([]string{jn.TableKey}, jn.Columns...)
		if plan, layout, err = planTable(ctx, c.env.FS, jn.Table, cols); err != nil {
			return c.tableErr(ctx, op, "columns", err)
		}
	}
	kf := plan.Fields[0]
	tabInt, ok := keyKind(kf.Kind, kf.DType, 1)
	switch {
	case !ok:
		return c.errf(op, "table_key", "side table column %q is %v %v; a join key must be an integer or string column", jn.TableKey, kf.Kind, kf.DType)
	case tabInt != rowInt:
		return c.errf(op, "table_key", "the rows' key %q is %s but the side table's %q is %s; both must be integers or both strings",
			jn.On, kv.describe(), jn.TableKey, (&value{kind: kf.Kind, dtype: kf.DType, width: 1}).describe())
	case kv.unit > 0 && kf.Counts() > 0 && kv.unit != kf.Counts():
		// Counts of two units never equal for one instant: no row would match.
		return c.errf(op, "table_key", "the rows' key %q counts %s but the side table's %q %s; convert one to the other's unit in a map first (ms * 1000 counts microseconds)",
			jn.On, column.UnitName(kv.unit), jn.TableKey, column.UnitName(kf.Counts()))
	}
	t := &sideTable{op: op, jn: jn, plan: plan, intKey: tabInt, unique: jn.Kind == "left"}
	if err := c.bucketJoin(ctx, op, t, layout, cols); err != nil {
		return err
	}
	c.joins = append(c.joins, t)
	if jn.Kind != "left" {
		c.addStep(&joinDrop{stepBase: stepBase{op: op, what: jn.Kind + " " + jn.On, reads: []int{e.vid}}, t: t, key: e.vid, anti: jn.Kind == "anti",
			use: bucketUse{b: t.buckets}})
		return nil
	}
	s := &joinLeft{stepBase: stepBase{op: op, what: "left " + jn.On, reads: []int{e.vid}}, t: t, key: e.vid, use: bucketUse{b: t.buckets}}
	type added struct {
		name string
		vid  int
	}
	var adds []added
	for i, name := range jn.Columns {
		if c.index(name) >= 0 {
			return c.errf(op, "columns", "column %q is already in the rows; rename or drop it before the join", name)
		}
		f := plan.Fields[i+1]
		vid := c.addValue(value{kind: f.Kind, dtype: f.DType, width: 1, nullable: true, producer: -1, unit: f.Counts()})
		s.writes = append(s.writes, vid)
		adds = append(adds, added{name, vid})
	}
	c.addStep(s)
	for _, a := range adds {
		c.setColumn(a.name, a.vid, true)
	}
	return nil
}

// PlanTable plans a side table (a Parquet file, glob or directory, or an
// Iceberg table's snapshot) with the columns cols (nil: all).
func PlanTable(ctx context.Context, fsys decode.FS, table string, cols []string) (*decode.Plan, error) {
	p, _, err := planTable(ctx, fsys, table, cols)
	return p, err
}

// planTable plans a side table, and says how an Iceberg table is
// bucketed (nil: not, or not an Iceberg table).
func planTable(ctx context.Context, fsys decode.FS, table string, cols []string) (*decode.Plan, *tableLayout, error) {
	if !iceberg.IsRef(table) {
		p, err := decode.PlanFiles(ctx, []string{table}, decode.PlanOptions{Columns: cols, FS: fsys})
		return p, nil, err
	}
	sc, err := iceberg.Opener{FS: fsys}.Scan(ctx, table)
	if err != nil {
		return nil, nil, err
	}
	if len(sc.Files) == 0 {
		return nil, nil, fmt.Errorf("iceberg table %s snapshot %d has no data files", sc.Table, sc.SnapshotID)
	}
	// By field id: a column renamed since a file was written; a file's
	// identity partition values for the columns it lacks.
	byPath := make(map[string]*decode.TableSchema, len(sc.Files))
	for i := range sc.Files {
		byPath[sc.Files[i].Path] = sc.SchemaOf(&sc.Files[i])
	}
	schema := func(path string) *decode.TableSchema { return byPath[path] }
	paths := iceberg.Paths(sc.Files)
	p, err := decode.PlanFiles(ctx, paths, decode.PlanOptions{Columns: cols, FS: fsys, Table: schema, Listed: true})
	if err != nil {
		return nil, nil, err
	}
	// The rows the snapshot deletes are no rows of the table: each unit
	// gets its own, and the loader drops them (sideTable.load).
	byFile, err := iceberg.Deletions(ctx, fsys, []iceberg.Input{{Scan: sc}}, paths)
	if err == nil {
		_, err = iceberg.SetDeletions(p, byFile, paths)
	}
	if err != nil || sc.Buckets == nil {
		return p, nil, err
	}
	l := &tableLayout{col: sc.Buckets.Column, n: sc.Buckets.N, of: map[string]int{}, schema: schema}
	for _, f := range sc.Files {
		l.of[f.Path] = f.Bucket
	}
	return p, l, nil
}

// tableErr reports a failure to plan the side table: a missing column
// (with the table's columns to choose from) under field, anything else
// under table.
func (c *compiler) tableErr(ctx context.Context, op *spec.Op, field string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, decode.ErrMissingColumn) {
		msg := err.Error()
		var de *decode.Error
		if errors.As(err, &de) {
			msg = de.Err.Error()
		}
		if name := quotedName(msg); name != "" {
			msg = fmt.Sprintf("side table %s has no column %q", op.Join.Table, name)
			if all, _, err := planTable(ctx, c.env.FS, op.Join.Table, nil); err == nil {
				msg += didYouMean(name, inputNames(all.Fields))
			}
		}
		return c.errf(op, field, "%s", msg)
	}
	fe := c.errf(op, "table", "side table %s: %v", op.Join.Table, err)
	fe.Err = err
	return fe
}

func (s *joinDrop) clone() step {
	return &joinDrop{stepBase: s.stepBase, t: s.t, key: s.key, anti: s.anti, use: bucketUse{b: s.use.b}}
}

func (s *joinDrop) optional() bool { return false }

func (s *joinDrop) drop(f *frame, sel []int32) ([]int32, error) {
	n := f.rows
	if sel != nil {
		n = len(sel)
	}
	t, err := s.use.table(s.t)
	if err != nil {
		return nil, err
	}
	if err := s.use.checkKeys(s.t, f.vals[s.key], sel, n); err != nil {
		return nil, err
	}
	s.idx = growI32(s.idx, n)
	t.lookup(f.vals[s.key], sel, s.idx)
	s.out = s.out[:0]
	for j, r := range s.idx {
		if (r >= 0) != s.anti {
			if sel != nil {
				s.out = append(s.out, sel[j])
			} else {
				s.out = append(s.out, int32(j))
			}
		}
	}
	return s.out, nil
}

func (s *joinLeft) clone() step {
	return &joinLeft{stepBase: s.stepBase, t: s.t, key: s.key, use: bucketUse{b: s.use.b}}
}

func (s *joinLeft) compute(f *frame) error {
	t, err := s.use.table(s.t)
	if err != nil {
		return err
	}
	if err := s.use.checkKeys(s.t, f.vals[s.key], nil, f.rows); err != nil {
		return err
	}
	s.idx = growI32(s.idx, f.rows)
	t.lookup(f.vals[s.key], nil, s.idx)
	for i, vid := range s.writes {
		gatherOrNull(f.dst(vid), &t.cols[i], s.idx)
	}
	return nil
}

// gatherOrNull sets dst to the rows idx of src, null where idx is -1.
func gatherOrNull(dst, src *column.Column, idx []int32) {
	dst.Kind, dst.DType, dst.Width, dst.Len = src.Kind, src.DType, src.Width, len(idx)
	size := src.DType.Size()
	switch src.Kind {
	case column.Fixed:
		w := size * src.Width
		dst.Data = column.Grow(dst.Data, len(idx)*w)
		dst.Offsets = nil
		switch w {
		case 8:
			d, s := u64s(dst.Data), u64s(src.Data)
			for j, r := range idx {
				if r >= 0 {
					d[j] = s[r]
				} else {
					d[j] = 0
				}
			}
		case 4:
			d, s := u32s(dst.Data), u32s(src.Data)
			for j, r := range idx {
				if r >= 0 {
					d[j] = s[r]
				} else {
					d[j] = 0
				}
			}
		default:
			for j, r := range idx {
				if r >= 0 {
					copy(dst.Data[j*w:(j+1)*w], src.Data[int(r)*w:int(r+1)*w])
				} else {
					clear(dst.Data[j*w : (j+1)*w])
				}
			}
		}
	default:
		dst.Offsets = growI64(dst.Offsets, len(idx)+1)
		dst.Offsets[0] = 0
		var n int64
		for j, r := range idx {
			if r >= 0 {
				n += src.Offsets[r+1] - src.Offsets[r]
			}
			dst.Offsets[j+1] = n
		}
		dst.Data = column.Grow(dst.Data, int(n)*size)
		es := int64(size)
		for j, r := range idx {
			if r >= 0 {
				copy(dst.Data[dst.Offsets[j]*es:], src.Data[src.Offsets[r]*es:src.Offsets[r+1]*es])
			}
		}
	}
	dst.Valid = column.Grow(dst.Valid, len(idx))
	for j, r := range idx {
		v := byte(0)
		if r >= 0 {
			v = 1
			if src.Valid != nil {
				v = src.Valid[r]
			}
		}
		dst.Valid[j] = v
	}
}
