package ops

import (
	"fmt"
	"slices"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/spec"
)

// Feature groups: stack and jagged, each one field of the ring made of
// several columns. The ops here prepare the members, in the workers: nulls
// filled or checked, dtypes converted, ids hashed and lists cut. The
// members reach Apply's output as columns of their own (Output marks them
// with their Group), and the engine's packer writes each group straight
// from them into the ring slot: a stack as its [B, N] tensor, a jagged
// group key-major (values, offsets, lengths). No other copy of a group is
// made: interleaving N columns where they are hot (the shuffle window, or
// the unit the packer reads anyway) costs about what copying them does,
// where a [B, N] column computed in the workers costs the producer one
// more pass over every unit in memory (half as much CPU again, measured).

// Group describes one feature group of the output: its members are the
// columns of Output whose Group is the group's index in Groups plus one,
// in order.
type Group struct {
	Name string
	// Kind is "stack" (a [B, N] tensor of DType: member j, of DType, is
	// column j) or "jagged" (a KeyedJaggedTensor: member k holds key
	// Keys[k], a list or a scalar column of int64 ids; a null scalar is an
	// empty list).
	Kind  string
	DType column.DType
	Keys  []string
	// Weights (jagged only; nil when no key has weights) holds for key k
	// the member that holds the weights of its ids, float32 lists lined
	// up with them, or -1 for a key whose ids weigh 1. Weight members
	// follow the K key members.
	Weights []int
}

// group is a group's compile-time description, held by its value.
type group struct {
	Group
	line    int
	members []int    // member value ids
	names   []string // physical column names of the members
	nulls   []bool   // member keeps its validity (a scalar under nulls: fill)
}

// groupLookup is lookup for ops that read a column's rows: a group has
// none of its own.
func (c *compiler) groupLookup(name string) (*entry, string) {
	e, why := c.lookup(name)
	if e != nil && c.vals[e.vid].group != nil {
		g := c.vals[e.vid].group
		return nil, fmt.Sprintf("column %q is the %s group made at line %d; no op can read a group: use its columns before the %s op",
			name, g.Kind, g.line, g.Kind)
	}
	return e, why
}

// takeColumn looks up a stack member; lookup for a group says why not.
func (c *compiler) takeColumn(op *spec.Op, field, name string) (*entry, error) {
	e, why := c.groupLookup(name)
	if e == nil {
		return nil, c.errf(op, field, "%s", why)
	}
	return e, nil
}

func (c *compiler) removeMembers(op *spec.Op, out string, names []string) {
	for _, name := range names {
		if i := c.index(name); i >= 0 {
			c.schema = append(c.schema[:i], c.schema[i+1:]...)
			c.gone[name] = fmt.Sprintf("was put into the %s group %q at line %d", op.Kind, out, op.Line)
		}
	}
}

func (c *compiler) stack(op *spec.Op) error {
	s := op.Stack
	if err := c.checkName(op, "output", s.Output); err != nil {
		return err
	}
	dt, err := column.ParseDType(s.DType)
	if err != nil {
		return c.errf(op, "dtype", "%v", err)
	}
	g := &group{Group: Group{Name: s.Output, Kind: "stack", DType: dt}, line: op.Line}
	var checks []int
	var checkNames []string
	for i, name := range s.Columns {
		field := fmt.Sprintf("columns[%d]", i)
		e, err := c.takeColumn(op, field, name)
		if err != nil {
			return err
		}
		v := c.vals[e.vid]
		if v.kind != column.Fixed || v.width != 1 || !isNumDType(v.dtype) && v.dtype != column.Bool {
			return c.errf(op, field, "column %q is %s; a stack takes numeric scalar columns (shape lists with sequence, hash strings with hash_mod in a map)", name, v.describe())
		}
		if dt == column.Int64 && !isIntDType(v.dtype) && v.dtype != column.Bool {
			return c.errf(op, field, "column %q is %s; a stack of dtype int64 takes integer columns: stack as float32, or cast it first", name, v.describe())
		}
		vid := e.vid
		if e.nullable && s.Nulls == "error" {
			checks, checkNames = append(checks, vid), append(checkNames, name)
		}
		if e.nullable && s.Nulls == "fill" {
			one, err := fillBytes(v.dtype, s.Fill)
			if err != nil {
				return c.errf(op, "fill", "column %q: %v", name, err)
			}
			if !allZero(one) { // null rows hold zeros already
				nv := c.addValue(value{kind: v.kind, dtype: v.dtype, width: 1, producer: -1})
				c.addStep(&nullsFill{stepBase: stepBase{op: op, what: name, reads: []int{vid}, writes: []int{nv}}, one: one})
				vid = nv
			}
		}
		if v.dtype != dt {
			nv := c.addValue(value{kind: v.kind, dtype: dt, width: 1, producer: -1})
			c.addStep(&castStep{stepBase: stepBase{op: op, what: name, reads: []int{vid}, writes: []int{nv}}, src: vid, to: dt})
			vid = nv
		}
		g.members = append(g.members, vid)
		g.names = append(g.names, s.Output+"/"+name)
		g.nulls = append(g.nulls, false)
	}
	if len(checks) > 0 {
		c.addStep(&nullsCheck{stepBase: stepBase{op: op, what: fmt.Sprint(checkNames), reads: checks}, names: checkNames})
	}
	c.removeMembers(op, s.Output, s.Columns)
	vid := c.addValue(value{kind: column.Fixed, dtype: dt, width: len(s.Columns), producer: -1, group: g})
	c.setColumn(s.Output, vid, false)
	return nil
}

func (c *compiler) jagged(op *spec.Op) error {
	j := op.Jagged
	if err := c.checkName(op, "output", j.Output); err != nil {
		return err
	}
	g := &group{Group: Group{Name: j.Output, Kind: "jagged", DType: column.Int64}, line: op.Line}
	var checks, weights []int
	var wnulls []bool
	var checkNames, names []string
	for i := range j.Keys {
		k := &j.Keys[i]
		vid, keep, err := c.jaggedKey(op, i, k)
		if err != nil {
			return err
		}
		e := &c.schema[c.index(k.Column)]
		if e.nullable && j.Nulls == "error" {
			checks, checkNames = append(checks, e.vid), append(checkNames, k.Column)
		}
		wvid, wnull := -1, false
		if k.Weights != "" {
			if wvid, wnull, err = c.jaggedWeights(op, i, k, e.vid); err != nil {
				return err
			}
		}
		weights, wnulls = append(weights, wvid), append(wnulls, wnull)
		g.Keys = append(g.Keys, k.Key)
		g.members = append(g.members, vid)
		g.names = append(g.names, j.Output+"/"+k.Key)
		g.nulls = append(g.nulls, keep && j.Nulls == "fill")
		names = append(names, k.Column)
	}
	c.weightMembers(op, g, weights, wnulls)
	if len(checks) > 0 {
		c.addStep(&nullsCheck{stepBase: stepBase{op: op, what: fmt.Sprint(checkNames), reads: checks}, names: checkNames})
	}
	c.removeMembers(op, j.Output, names)
	vid := c.addValue(value{kind: column.List, dtype: column.Int64, width: 1, producer: -1, group: g})
	c.setColumn(j.Output, vid, false)
	return nil
}

// jaggedKey compiles key i of a jagged op into the value of its member: a
// List or a scalar Fixed column of int64 ids. keep reports whether the
// member is a scalar that may be null (a null row is an empty list).
func (c *compiler) jaggedKey(op *spec.Op, i int, k *spec.JaggedKey) (vid int, keep bool, err error) {
	field := fmt.Sprintf("keys[%d].column", i)
	e, why := c.groupLookup(k.Column)
	if e == nil {
		return 0, false, c.keyErr(op, k, field, "%s", why)
	}
	v := c.vals[e.vid]
	isInt := isIntDType(v.dtype) || v.dtype == column.Bool
	switch {
	case v.kind == column.Bytes && k.HashMod == 0:
		return 0, false, c.keyErr(op, k, fmt.Sprintf("keys[%d].hash_mod", i),
			"column %q is a string; a jagged key holds integer ids: give it hash_mod (e.g. hash_mod: 1048576)", k.Column)
	case v.kind == column.Bytes, v.kind == column.List && isInt, v.kind == column.Fixed && v.width == 1 && isInt:
	default:
		return 0, false, c.keyErr(op, k, field,
			"column %q is %s; a jagged key takes a list or scalar column of integer ids, or strings with hash_mod", k.Column, v.describe())
	}
	vid = e.vid
	list := v.kind == column.List
	switch {
	case k.HashMod > 0 || list && k.MaxLength > 0:
		nv := value{kind: column.Fixed, dtype: column.Int64, width: 1, producer: -1}
		if list {
			nv.kind = column.List
		}
		vid = c.addValue(nv)
		st := &keyStep{stepBase: stepBase{op: op, what: k.Key, reads: []int{e.vid}, writes: []int{vid}},
			mod: uint64(k.HashMod), limit: k.MaxLength, keepLast: k.Truncate == "left"}
		c.addStep(st)
	case v.dtype != column.Int64:
		vid = c.addValue(value{kind: v.kind, dtype: column.Int64, width: 1, producer: -1})
		c.addStep(&castStep{stepBase: stepBase{op: op, what: k.Key, reads: []int{e.vid}, writes: []int{vid}}, src: e.vid, to: column.Int64})
	}
	return vid, !list && e.nullable, nil
}

// jaggedWeights compiles the weights of key i (whose ids are value
// keyVid before any cut). A list key's weights are a list column, replaced
// by its rows cut as the key's are and checked against the key's lengths;
// a scalar key's are a scalar column, one weight for its one id. It
// returns the weights' value, and whether it may be null (a scalar's: the
// packer refuses a null weight of an id).
func (c *compiler) jaggedWeights(op *spec.Op, i int, k *spec.JaggedKey, keyVid int) (vid int, nullable bool, err error) {
	field := fmt.Sprintf("keys[%d].weights", i)
	e, why := c.groupLookup(k.Weights)
	if e == nil {
		return 0, false, c.keyErr(op, k, field, "%s", why)
	}
	v := c.vals[e.vid]
	if c.vals[keyVid].kind != column.List {
		if v.kind != column.Fixed || v.width != 1 || !isNumDType(v.dtype) {
			return 0, false, c.keyErr(op, k, field, "column %q is %s; the weights of a scalar key (one id a row) are a scalar column of numbers", k.Weights, v.describe())
		}
		return e.vid, e.nullable, nil
	}
	if v.kind != column.List || !isNumDType(v.dtype) {
		return 0, false, c.keyErr(op, k, field, "column %q is %s; weights are a list of numbers lined up with the key's ids (a map's values)", k.Weights, v.describe())
	}
	vid = c.addValue(value{kind: column.List, dtype: v.dtype, width: 1, producer: -1})
	c.addStep(&weightsStep{stepBase: stepBase{op: op, what: k.Weights, reads: []int{keyVid, e.vid}, writes: []int{vid}},
		key: k.Column, limit: k.MaxLength, keepLast: k.Truncate == "left"})
	c.setColumn(k.Weights, vid, e.nullable)
	return vid, false, nil
}

// weightMembers makes the weights of g's keys members of the group, after
// its keys: weights[k] is key k's (cut) weights' value, or -1, and
// nulls[k] whether they may be null. The column of weights stays in the
// schema too, for a select to keep; the group's member is it as float32,
// the dtype of torchrec's weights.
func (c *compiler) weightMembers(op *spec.Op, g *group, weights []int, nulls []bool) {
	if !slices.ContainsFunc(weights, func(w int) bool { return w >= 0 }) {
		return
	}
	g.Weights = make([]int, len(weights))
	for k, vid := range weights {
		if vid < 0 {
			g.Weights[k] = -1
			continue
		}
		if c.vals[vid].dtype != column.Float32 {
			nv := c.addValue(value{kind: c.vals[vid].kind, dtype: column.Float32, width: 1, producer: -1})
			c.addStep(&castStep{stepBase: stepBase{op: op, what: g.Keys[k] + " weights", reads: []int{vid}, writes: []int{nv}}, src: vid, to: column.Float32})
			vid = nv
		}
		g.Weights[k] = len(g.members)
		g.members = append(g.members, vid)
		g.names = append(g.names, g.Name+"/"+g.Keys[k]+"#weights")
		g.nulls = append(g.nulls, nulls[k])
	}
}

// keyErr is errf at the line of a jagged key.
func (c *compiler) keyErr(op *spec.Op, k *spec.JaggedKey, field, format string, args ...any) *spec.FieldError {
	e := c.errf(op, field, format, args...)
	if k.Line > 0 {
		e.Line = k.Line
	}
	return e
}

// expandGroups returns the output columns with every group replaced by its
// members, and the groups in output order.
func expandGroups(schema []entry, vals []value) ([]entry, []Group) {
	var out []entry
	var groups []Group
	for _, e := range schema {
		g := vals[e.vid].group
		if g == nil {
			out = append(out, e)
			continue
		}
		gr := g.Group
		gr.Name = e.name // renamed since, perhaps
		groups = append(groups, gr)
		for m, vid := range g.members {
			name := e.name + g.names[m][len(g.Name):]
			out = append(out, entry{name: name, vid: vid, nullable: g.nulls[m], group: len(groups)})
		}
	}
	return out, groups
}
