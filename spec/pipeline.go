package spec

import (
	"fmt"
	"math"
	"strings"

	"gopkg.in/yaml.v3"
)

// Op is one row-local step of a pipeline: exactly one of its pointers or
// slices is set, as Kind says. Row-local steps see one work unit's rows at
// a time and nothing else, which is what lets a peer daemon run them.
type Op struct {
	Kind string // filter, sample, join, map, sequence, cast, nulls, stack, jagged, select, rename, drop
	Path string // "pipeline[3]", for errors
	Line int    // line of the op in the spec

	Filter   *Filter
	Sample   *Sample
	Join     *Join
	Map      []Assign // output columns in the order written
	Sequence *Sequence
	Cast     []Assign // column → dtype name
	Nulls    *Nulls
	Stack    *Stack
	Jagged   *Jagged
	Select   []string
	Rename   []Assign // old name → new name
	Drop     []string
}

// Assign is one "name: value" entry of a map, cast or rename op.
type Assign struct {
	Name  string
	Value string
	Line  int
}

// Filter keeps the rows for which Expr is true (null counts as false).
type Filter struct {
	Expr string `yaml:"expr"`
}

// Sample keeps each row with a probability chosen by the first rule whose
// When matches, deterministically: a row is kept when
// hash(Seed, Key) / 2^64 < rate, so the same rows survive every run.
type Sample struct {
	// Key is the column hashed to decide (e.g. a row or request id).
	Key string `yaml:"key"`
	// Seed defaults to the job's seed.
	Seed *uint64 `yaml:"seed"`
	// Rates are tried in order; a rule without When matches every row.
	// Rows that match no rule are kept.
	Rates []Rate `yaml:"rates"`
	// Weight, if set, names an output float32 column holding 1/rate of
	// the rule that kept the row, so a trainer can undo the downsampling.
	Weight string `yaml:"weight"`
}

// Rate is one sampling rule.
type Rate struct {
	When string  `yaml:"when"`
	Rate float64 `yaml:"rate"`
}

// Join is a map-side join against a side table loaded once per job.
type Join struct {
	// Kind is semi (keep rows whose key is in the table), anti (keep rows
	// whose key is not: drop spam users) or left (keep every row and add
	// Columns from the matching table row, null when none matches).
	Kind string `yaml:"kind"`
	// Table is a Parquet file, glob or directory, or an Iceberg table
	// ("iceberg:...", see IcebergScheme). Relative to the spec.
	Table string `yaml:"table"`
	// On is the key column of the rows; TableKey the table's (default On).
	On       string `yaml:"on"`
	TableKey string `yaml:"table_key"`
	// Columns are the table columns a left join adds.
	Columns []string `yaml:"columns"`
	// MaxMemory bounds the loaded table (default 1GiB); a larger table is
	// an error before the job starts.
	MaxMemory Size `yaml:"max_memory"`
	// Buckets declares that the input and the table are both bucketed
	// on the join key into this many buckets, for plain Parquet: every
	// file lies under a path element "bucket=B" (B from 0), holding the
	// rows whose key has Iceberg's bucket[Buckets] value B. Each work
	// unit then joins against its bucket of the table only, loaded when
	// needed and kept within MaxMemory (a bucket join). 0 finds the
	// buckets from Iceberg bucket partitions of both sides, and falls
	// back to loading the whole table when they do not match.
	Buckets int `yaml:"buckets"`
}

// Sequence shapes a list column: truncated or padded to Length into a
// [B, Length] tensor, or kept ragged (values + offsets) when Length is 0.
type Sequence struct {
	Column string `yaml:"column"`
	// Length is the fixed output length; 0 keeps the column ragged.
	Length int `yaml:"length"`
	// Truncate says which end a long row loses: "left" (default: keep the
	// most recent, last elements) or "right".
	Truncate string `yaml:"truncate"`
	// PadSide says where a short row is padded: "right" (default) or "left".
	PadSide string `yaml:"pad_side"`
	// PadValue fills the padding (default 0); a fraction only for a
	// float list.
	PadValue Number `yaml:"pad_value"`
	// Lengths, if set, names an output int32 column with each row's
	// length after truncation.
	Lengths string `yaml:"lengths"`
	// MaxLength bounds ragged rows (0: no bound).
	MaxLength int `yaml:"max_length"`
	// OnLong is what a row longer than Length (or MaxLength) gets:
	// "truncate" (default), "error" or "skip" (drop the row).
	OnLong string `yaml:"on_long"`
	// Output renames the result (default: replace Column).
	Output string `yaml:"output"`
}

// Nulls sets what happens to nulls in output columns: "error" fails naming
// the file, row group and column; "skip" drops the row; "fill" replaces the
// null with Fill (numbers), an empty list or an empty string. Columns not
// covered keep their validity tensor.
type Nulls struct {
	Policy  string   `yaml:"policy"`
	Columns []string `yaml:"columns"` // empty means every nullable column
	Fill    Number   `yaml:"fill"`
}

// Stack is a dense feature group: Columns, numeric, become one [B, N]
// tensor of DType, written into the ring slot without a tensor per column.
type Stack struct {
	Output  string   `yaml:"output"`
	Columns []string `yaml:"columns"`
	// DType is float32 (default), bfloat16 or int64 (integer columns only).
	DType string `yaml:"dtype"`
	// Nulls is error (default: a null fails the job) or fill (with Fill).
	Nulls string `yaml:"nulls"`
	Fill  Number `yaml:"fill"`
}

// Jagged is a sparse feature group: list or scalar categorical columns
// become one KeyedJaggedTensor (keys, values key-major, lengths, offsets).
type Jagged struct {
	Output string      `yaml:"output"`
	Keys   []JaggedKey `yaml:"keys"`
	// Nulls is error (default) or fill: a null row becomes an empty list.
	Nulls string `yaml:"nulls"`
}

// JaggedKey is one key of a Jagged group. In the spec it is a column name
// or a mapping with these fields.
type JaggedKey struct {
	Column string `yaml:"column"`
	// Key names the key in the group (default: Column).
	Key string `yaml:"key"`
	// MaxLength bounds a list row (0: no bound); Truncate says which end
	// a long row loses: left (default: keep the last, most recent) or right.
	MaxLength int    `yaml:"max_length"`
	Truncate  string `yaml:"truncate"`
	// HashMod, when > 0, replaces every value v by hash_mod(v, HashMod), as
	// the expression function does; strings must be hashed.
	HashMod int64 `yaml:"hash_mod"`
	// Weights names a list column lined up with Column element by element
	// (a map's values beside its keys): the weights of a torchrec weighted
	// feature. It stays a column of its own, replaced by its rows cut as
	// the key's are (MaxLength, Truncate), and a row whose length is not
	// its key's fails the job.
	Weights string `yaml:"weights"`
	Line    int    `yaml:"-"`
}

type jaggedKey JaggedKey

// DecodeNode implements NodeDecoder: a key is a column name or a mapping.
func (k *JaggedKey) DecodeNode(d *Decoder, n *yaml.Node, path string) {
	k.Line = n.Line
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		k.Column = n.Value
		d.lines[path+".column"], d.lines[path+".key"] = n.Line, n.Line
		return
	}
	d.Decode(n, path, (*jaggedKey)(k))
}

// Shuffle is the shuffling section. Both shuffles are seeded with the
// job's seed and the epoch, so every run gives the same order.
type Shuffle struct {
	// Units shuffles the order of work units (row groups) every epoch.
	Units bool `yaml:"units"`
	// Buffer is the size in rows of the shuffle buffer that rows pass
	// through after the reorder (0: none).
	Buffer int `yaml:"buffer"`
}

var opKinds = []string{"filter", "sample", "join", "map", "sequence", "cast", "nulls", "stack", "jagged", "select", "rename", "drop"}

// DecodeNode implements NodeDecoder: an op is a mapping with one key, its
// kind.
func (op *Op) DecodeNode(d *Decoder, n *yaml.Node, path string) {
	op.Path, op.Line = path, n.Line
	if n.Kind != yaml.MappingNode || len(n.Content) != 2 {
		d.Errorf(n, path, "want one op, a mapping with one key of %s (e.g. `- filter: \"label == 1\"`)", strings.Join(opKinds, ", "))
		return
	}
	k, v := n.Content[0], n.Content[1]
	op.Kind = k.Value
	p := path + "." + k.Value
	switch k.Value {
	case "filter":
		op.Filter = &Filter{}
		if v.Kind == yaml.ScalarNode {
			d.Decode(v, p, &op.Filter.Expr)
		} else {
			d.Decode(v, p, op.Filter)
		}
	case "sample":
		op.Sample = &Sample{}
		d.Decode(v, p, op.Sample)
	case "join":
		op.Join = &Join{}
		d.Decode(v, p, op.Join)
	case "map":
		op.Map = d.assigns(v, p)
	case "cast":
		op.Cast = d.assigns(v, p)
	case "rename":
		op.Rename = d.assigns(v, p)
	case "sequence":
		op.Sequence = &Sequence{}
		d.Decode(v, p, op.Sequence)
	case "nulls":
		op.Nulls = &Nulls{}
		d.Decode(v, p, op.Nulls)
	case "stack":
		op.Stack = &Stack{}
		d.Decode(v, p, op.Stack)
	case "jagged":
		op.Jagged = &Jagged{}
		d.Decode(v, p, op.Jagged)
	case "select":
		d.Decode(v, p, &op.Select)
	case "drop":
		d.Decode(v, p, &op.Drop)
	default:
		d.Errorf(k, path, "unknown op %q (want one of %s)", k.Value, strings.Join(opKinds, ", "))
	}
}

// assigns decodes an ordered "name: value" mapping.
func (d *Decoder) assigns(n *yaml.Node, path string) []Assign {
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, path, "want a mapping of column: value, got %s", kindName(n))
		return nil
	}
	var out []Assign
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		p := path + "." + k.Value
		d.lines[p] = k.Line
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			d.Errorf(v, p, "want a scalar value, got %s", kindName(v))
			continue
		}
		if seen[k.Value] {
			d.Errorf(k, p, "given twice")
			continue
		}
		seen[k.Value] = true
		out = append(out, Assign{Name: k.Value, Value: v.Value, Line: k.Line})
	}
	return out
}

// validatePipeline checks what can be checked without the input's schema;
// ops.Compile checks the rest (columns, types, expressions) before any
// work starts and reports it with OpError.
func (j *Job) validatePipeline(d *Decoder) {
	for i := range j.Pipeline {
		op := &j.Pipeline[i]
		p := op.Path + "." + op.Kind
		bad := func(field, format string, args ...any) {
			fp := p
			if field != "" {
				fp += "." + field
			}
			if d.lines[fp] == 0 {
				d.lines[fp] = op.Line // a field that is missing: the op's line
			}
			d.Errorf(nil, fp, format, args...)
		}
		j.validateOp(op, bad)
	}
	if j.Shuffle.Buffer < 0 || j.Shuffle.Buffer > 1<<26 {
		d.Errorf(nil, "shuffle.buffer", "want 0 (no buffer) to 67108864 rows, got %d", j.Shuffle.Buffer)
	}
}

// validateOp checks one op as its kind requires and fills in its defaults.
func (j *Job) validateOp(op *Op, bad badFunc) {
	switch op.Kind {
	case "filter":
		if strings.TrimSpace(op.Filter.Expr) == "" {
			bad("", "want a boolean expression, such as \"label == 1\"")
		}
	case "sample":
		validateSample(op.Sample, bad)
	case "join":
		validateJoin(op.Join, j.dir, bad)
	case "sequence":
		validateSequence(op.Sequence, bad)
	case "cast":
		for _, a := range op.Cast {
			switch a.Value {
			case "int32", "int64", "float32", "float64", "bfloat16":
			default:
				bad(a.Name, "want int32, int64, float32, float64 or bfloat16, got %q", a.Value)
			}
		}
	case "nulls":
		switch op.Nulls.Policy {
		case "error", "skip", "fill":
		default:
			bad("policy", "want error, skip or fill, got %q", op.Nulls.Policy)
		}
	case "stack":
		validateStack(op.Stack, bad)
	case "jagged":
		validateJagged(op.Jagged, bad)
	case "select", "drop":
		list := op.Select
		if op.Kind == "drop" {
			list = op.Drop
		}
		if len(list) == 0 {
			bad("", "want a list of column names")
		}
	case "map", "rename":
		if len(op.Map)+len(op.Rename) == 0 {
			bad("", "want a mapping of column: value")
		}
	}
}

// validateSample checks a sample op: a key, and rates in (0, 1] of which
// only the last may match every row.
func validateSample(s *Sample, bad badFunc) {
	if s.Key == "" {
		bad("key", "required: the column whose hash decides which rows are kept")
	}
	if len(s.Rates) == 0 {
		bad("rates", "required: a list of {when: EXPR, rate: R}; a last entry without when is the default")
	}
	for k, r := range s.Rates {
		if math.IsNaN(r.Rate) || r.Rate <= 0 || r.Rate > 1 {
			bad(fmt.Sprintf("rates[%d].rate", k), "want a rate in (0, 1], got %v", r.Rate)
		}
		if r.When == "" && k != len(s.Rates)-1 {
			bad(fmt.Sprintf("rates[%d]", k), "only the last rule may omit when (it matches every row, so later rules would never apply)")
		}
	}
}

// validateJoin checks a join op and fills in its defaults; its table,
// relative to the spec, is anchored to dir, the spec's directory.
func validateJoin(jn *Join, dir string, bad badFunc) {
	switch jn.Kind {
	case "semi", "anti":
		if len(jn.Columns) > 0 {
			bad("columns", "a %s join adds no columns; use kind: left", jn.Kind)
		}
	case "left":
	default:
		bad("kind", "want semi, anti or left, got %q", jn.Kind)
	}
	if jn.Table == "" {
		bad("table", "required: the side table's Parquet file or directory")
	}
	if jn.On == "" {
		bad("on", "required: the key column")
	}
	if jn.MaxMemory == 0 {
		jn.MaxMemory = 1 << 30
	}
	if jn.TableKey == "" {
		jn.TableKey = jn.On
	}
	jn.Table = anchor(dir, jn.Table)
	if jn.Buckets < 0 || jn.Buckets > MaxBuckets {
		bad("buckets", "want 0 (found from Iceberg partitions) to %d, got %d", MaxBuckets, jn.Buckets)
	}
}

// validateSequence checks a sequence op and fills in its defaults, each
// before the check that reads it.
func validateSequence(s *Sequence, bad badFunc) {
	if s.Column == "" {
		bad("column", "required: the list column to shape")
	}
	if s.Length < 0 || s.Length > 1<<20 {
		bad("length", "want 0 (keep ragged) to 1048576, got %d", s.Length)
	}
	if s.Truncate == "" {
		s.Truncate = "left"
	}
	if s.Truncate != "left" && s.Truncate != "right" {
		bad("truncate", "want left or right, got %q", s.Truncate)
	}
	if s.PadSide == "" {
		s.PadSide = "right"
	}
	if s.PadSide != "left" && s.PadSide != "right" {
		bad("pad_side", "want left or right, got %q", s.PadSide)
	}
	if s.OnLong == "" {
		s.OnLong = "truncate"
	}
	if s.OnLong != "truncate" && s.OnLong != "error" && s.OnLong != "skip" {
		bad("on_long", "want truncate, error or skip, got %q", s.OnLong)
	}
	if s.Length == 0 && s.OnLong != "truncate" && s.MaxLength == 0 {
		bad("on_long", "a ragged sequence (length 0) needs max_length for on_long: %s", s.OnLong)
	}
	if s.Output == "" {
		s.Output = s.Column
	}
}

// OpError reports a problem found when compiling an op against the input's
// schema, in the spec's terms.
func (j *Job) OpError(op *Op, field, format string, args ...any) *FieldError {
	p := op.Path + "." + op.Kind
	if field != "" {
		p += "." + field
	}
	return &FieldError{File: j.file, Line: op.Line, Field: p, Msg: fmt.Sprintf(format, args...)}
}
