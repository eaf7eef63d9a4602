package ops

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/expr"
	"github.com/lastmile/lastmile/internal/suggest"
	"github.com/lastmile/lastmile/spec"
)

// value is a column's contents at compile time: an input column as
// decoded, or what one step computes. Values are immutable: an op that
// "replaces" a column makes a new value and points the schema entry at it,
// so a step always reads exactly the contents its op saw in spec order,
// wherever the step ends up running.
type value struct {
	input    string // input column name; "" for a computed value
	kind     column.Kind
	dtype    column.DType
	width    int
	nullable bool   // rows may be null
	producer int    // index of the step that computes it, -1 for inputs
	group    *group // a feature group (stack, jagged): no rows of its own
	unit     int64  // a timestamp's unit in nanoseconds (decode.Field.Counts), of an input, a joined or a filled column, or a map's or cast's (expr.Expr.Unit, which may be expr.UnknownUnit); 0 otherwise
}

// entry is one column of the schema at some point in the pipeline.
type entry struct {
	name     string
	vid      int
	nullable bool // false also after nulls: skip or error made it so
	// filled: a nulls fill left the value as it was, its null rows
	// holding the fill already (0, an empty string or list), so that
	// statistics of the value no longer describe the column's rows.
	filled bool
	group  int // output only: a member of Program.groups[group-1]; 0 for a column
}

// compiler walks the ops in spec order, keeping the schema as it stands
// after each op.
type compiler struct {
	job    *spec.Job
	env    Env
	input  []decode.Field // the whole input file schema
	proj   map[string]bool
	vals   []value
	schema []entry
	steps  []step
	gone   map[string]string // column → why it is no longer there
	joins  []*sideTable      // loaded after every op compiled

	// Error collection (check.go): the errors found so far, the columns
	// an op with errors would have made or changed, and whether the op
	// being compiled looked one of those up.
	errs    spec.Errors
	unsure  map[string]bool
	cascade bool
}

func (c *compiler) errf(op *spec.Op, field, format string, args ...any) *spec.FieldError {
	return c.job.OpError(op, field, format, args...)
}

// errIdx is errf for entry i of a select or drop list:
// "pipeline[3].select[1]".
func (c *compiler) errIdx(op *spec.Op, i int, format string, args ...any) *spec.FieldError {
	e := c.job.OpError(op, "", format, args...)
	e.Field += fmt.Sprintf("[%d]", i)
	return e
}

// errAt is errf with the line of a map, cast or rename entry.
func (c *compiler) errAt(op *spec.Op, a spec.Assign, format string, args ...any) *spec.FieldError {
	e := c.job.OpError(op, a.Name, format, args...)
	if a.Line > 0 {
		e.Line = a.Line
	}
	return e
}

// checkName refuses a name for a new column that the ring and the spec
// could not carry: empty, longer than 255 bytes or with control
// characters.
func (c *compiler) checkName(op *spec.Op, field, name string) error {
	ok := len(name) > 0 && len(name) <= 255
	for _, r := range name {
		ok = ok && r >= 0x20 && r != 0x7f
	}
	if !ok {
		return c.errf(op, field, "want a column name of 1 to 255 printable characters, got %q", name)
	}
	return nil
}

func (c *compiler) addValue(v value) int {
	c.vals = append(c.vals, v)
	return len(c.vals) - 1
}

func (c *compiler) addStep(s step) {
	b := s.base()
	for _, w := range b.writes {
		c.vals[w].producer = len(c.steps)
	}
	c.steps = append(c.steps, s)
}

// start sets the schema to the job's projection (every input column when
// it has none). A column the input lacks is an error, and unsure for the
// ops after it.
func (c *compiler) start() {
	byName := make(map[string]*decode.Field, len(c.input))
	for i := range c.input {
		byName[c.input[i].Name] = &c.input[i]
	}
	names := c.job.Columns
	if len(names) == 0 {
		for _, f := range c.input {
			names = append(names, f.Name)
		}
	}
	c.proj = make(map[string]bool, len(names))
	for i, n := range names {
		f := byName[n]
		field := fmt.Sprintf("columns[%d]", i)
		if f == nil || c.job.Invalid(field) {
			c.unsure[n] = true
			if f == nil && !c.job.Invalid(field) {
				msg := fmt.Sprintf("unknown column %q in the input%s", n, didYouMean(n, inputNames(c.input)))
				if why, ok := c.unreadable(n); ok {
					msg = why
				}
				c.errs = append(c.errs, &spec.FieldError{File: c.job.File(), Line: c.job.Line(field), Field: field, Msg: msg})
			}
			continue
		}
		c.proj[n] = true
		vid := c.addValue(value{input: n, kind: f.Kind, dtype: f.DType, width: 1, nullable: f.Nullable, producer: -1, unit: f.Counts()})
		c.schema = append(c.schema, entry{name: n, vid: vid, nullable: f.Nullable})
	}
}

// unreadable says why name, a column of the input, cannot be read, if
// it is one the decoder left out.
func (c *compiler) unreadable(name string) (string, bool) {
	var members []string
	for _, u := range c.env.Unreadable {
		if u.Name == name {
			return fmt.Sprintf("column %q cannot be read: %s", name, u.Why), true
		}
		if strings.HasPrefix(u.Name, name+".") {
			members = append(members, u.Name)
		}
	}
	for _, f := range c.input {
		if strings.HasPrefix(f.Name, name+".") {
			members = append(members, f.Name)
		}
	}
	if len(members) > 0 {
		slices.Sort(members)
		return fmt.Sprintf("column %q is a struct, a map or a list of structs: name its members, %s", name, strings.Join(members, ", ")), true
	}
	return "", false
}

func inputNames(fs []decode.Field) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

func (c *compiler) names() []string {
	out := make([]string, len(c.schema))
	for i, e := range c.schema {
		out[i] = e.name
	}
	return out
}

// index returns the schema position of name, or -1.
func (c *compiler) index(name string) int {
	for i := range c.schema {
		if c.schema[i].name == name {
			return i
		}
	}
	return -1
}

// lookup finds a column of the current schema, or explains why it is not
// there.
func (c *compiler) lookup(name string) (*entry, string) {
	if i := c.index(name); i >= 0 {
		return &c.schema[i], ""
	}
	return nil, c.missing(name)
}

// missing explains why name is not in the schema.
func (c *compiler) missing(name string) string {
	if c.unsure[name] {
		c.cascade = true // reported already, where it went wrong
	}
	if why, ok := c.gone[name]; ok {
		return fmt.Sprintf("column %q %s", name, why)
	}
	if why, ok := c.unreadable(name); ok {
		return why
	}
	if !c.proj[name] {
		for _, f := range c.input {
			if f.Name == name {
				return fmt.Sprintf("column %q is in the input but not in the job's columns; add it there", name)
			}
		}
	}
	return fmt.Sprintf("unknown column %q%s", name, didYouMean(name, c.names()))
}

// setColumn adds a column at the end of the schema or replaces the one of
// that name in place.
func (c *compiler) setColumn(name string, vid int, nullable bool) {
	delete(c.gone, name)
	if i := c.index(name); i >= 0 {
		c.schema[i] = entry{name: name, vid: vid, nullable: nullable}
		return
	}
	c.schema = append(c.schema, entry{name: name, vid: vid, nullable: nullable})
}

// exprSchema is the current schema as an expression sees it. Columns
// without an expression type (none today) are left out.
func (c *compiler) exprSchema() expr.Schema {
	s := make(expr.Schema, 0, len(c.schema))
	for _, e := range c.schema {
		v := &c.vals[e.vid]
		t, err := expr.ColumnType(v.kind, v.dtype, v.width, e.nullable)
		if err == nil && v.group == nil {
			s = append(s, expr.Field{Name: e.name, Type: t, Unit: v.unit})
		}
	}
	return s
}

// compileExpr compiles src against the current schema. The error names
// the offset within the expression and, for unknown columns, a
// suggestion.
func (c *compiler) compileExpr(src string) (*exprRef, error) {
	e, err := expr.Compile(src, c.exprSchema())
	if err != nil {
		var ee *expr.Error
		if errors.As(err, &ee) {
			msg := ee.Msg
			if strings.HasPrefix(msg, "unknown column") {
				if name := quotedName(msg); name != "" {
					msg = c.missing(name)
				}
			}
			return nil, fmt.Errorf("%s, at offset %d of %q", msg, ee.Pos, src)
		}
		return nil, fmt.Errorf("%v in %q", err, src)
	}
	r := &exprRef{e: e, src: src}
	for _, name := range e.Columns() {
		i := c.index(name)
		if i < 0 {
			return nil, fmt.Errorf("BUG: expression %q reads %q, which is not in the schema", src, name)
		}
		r.names = append(r.names, name)
		r.vids = append(r.vids, c.schema[i].vid)
		r.nonNull = append(r.nonNull, !c.schema[i].nullable)
		r.filled = append(r.filled, c.schema[i].filled)
	}
	return r, nil
}

// quotedName returns the first "..."-quoted word of msg.
func quotedName(msg string) string {
	i := strings.IndexByte(msg, '"')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(msg[i+1:], '"')
	if j < 0 {
		return ""
	}
	return msg[i+1 : i+1+j]
}

// didYouMean returns ` (did you mean "x"?)` for the name closest to
// name (suggest.Nearest), or "" when none is close.
func didYouMean(name string, names []string) string {
	if n := suggest.Nearest(name, names); n != "" {
		return fmt.Sprintf(" (did you mean %q?)", n)
	}
	return ""
}

// describe renders a value's type for errors: "int64", "list<int64>",
// "string", "[64]int64".
func (v *value) describe() string {
	switch {
	case v.group != nil && v.group.Kind == "jagged":
		return fmt.Sprintf("a jagged group of %d keys", len(v.group.members))
	case v.group != nil:
		return fmt.Sprintf("a stack [B, %d] of %v", v.width, v.dtype)
	case v.kind == column.Bytes:
		return "string"
	case v.kind == column.List:
		return "list<" + v.dtype.String() + ">"
	case v.width > 1:
		return fmt.Sprintf("[%d]%s", v.width, v.dtype)
	}
	return v.dtype.String()
}

func isIntDType(d column.DType) bool {
	return slices.Contains([]column.DType{column.Int8, column.Int16, column.Int32, column.Int64, column.Uint8}, d)
}

func isNumDType(d column.DType) bool {
	return isIntDType(d) || slices.Contains([]column.DType{column.Float16, column.BFloat16, column.Float32, column.Float64}, d)
}
