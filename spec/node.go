package spec

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/lastmile/lastmile/internal/suggest"
)

// FieldError is a problem with one field of a spec.
type FieldError struct {
	File  string // file name, or "" for a spec read from elsewhere
	Line  int    // 1-based line of the field, 0 if unknown
	Field string // dotted path, e.g. "ring.slots" or "ops[2].sample.rates"
	Msg   string
	Err   error // the cause, if any: the error reading a file the field names
}

// Unwrap returns the cause, so that errors.Is finds fs.ErrPermission in
// the error of a side table the job's user may not read.
func (e *FieldError) Unwrap() error { return e.Err }

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:", e.Line)
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one spec, in file order.
type Errors []*FieldError

func (es Errors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap lets errors.As find the individual FieldErrors.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// JoinErrors returns the FieldErrors of errs (each nil, a *FieldError or
// Errors) as one Errors sorted by line, or nil when there are none: the
// parse errors of a spec and those of checking it against its input are
// reported together. Any other error is returned as it is, alone.
func JoinErrors(errs ...error) error {
	var out Errors
	for _, err := range errs {
		var es Errors
		var fe *FieldError
		switch {
		case err == nil:
		case errors.As(err, &es):
			out = append(out, es...)
		case errors.As(err, &fe):
			out = append(out, fe)
		default:
			return err
		}
	}
	if len(out) == 0 {
		return nil
	}
	sort.SliceStable(out, func(i, k int) bool { return out[i].Line < out[k].Line })
	return out
}

// NodeDecoder is implemented by spec types that decode themselves from a
// YAML node (ops, sizes), with the decoder's error reporting.
type NodeDecoder interface {
	DecodeNode(d *Decoder, n *yaml.Node, path string)
}

// Decoder walks a YAML node tree into Go values strictly: unknown fields,
// wrong kinds and duplicates are recorded as FieldErrors with their lines,
// and decoding goes on so that all problems are reported at once.
type Decoder struct {
	File    string
	errs    Errors
	lines   map[string]int
	decoded int // errs[:decoded] are decode errors, which later ones at their fields repeat
	// nullKeeps: a list or mapping given null ("key:" and nothing) keeps
	// its value, as a struct's does, instead of being an error
	// (DecodeFile, where a section's entries may all be commented out).
	nullKeeps bool
}

func newDecoder(file string) *Decoder {
	return &Decoder{File: file, lines: make(map[string]int)}
}

// Errorf records a problem at node n (which may be nil).
func (d *Decoder) Errorf(n *yaml.Node, path, format string, args ...any) {
	for _, e := range d.errs[:d.decoded] {
		if within(path, e.Field) {
			return
		}
	}
	line := 0
	if n != nil {
		line = n.Line
	} else {
		line = d.lines[path]
	}
	d.errs = append(d.errs, &FieldError{File: d.File, Line: line, Field: path, Msg: fmt.Sprintf(format, args...)})
}

// Line returns the line where the field at path was given, 0 if it was not.
func (d *Decoder) Line(path string) int { return d.lines[path] }

// Err returns the recorded problems sorted by line, or nil.
func (d *Decoder) Err() error {
	if len(d.errs) == 0 {
		return nil
	}
	sort.SliceStable(d.errs, func(i, j int) bool { return d.errs[i].Line < d.errs[j].Line })
	return d.errs
}

var nodeDecoderType = reflect.TypeOf((*NodeDecoder)(nil)).Elem()

// Decode decodes n into v, which must be a non-nil pointer.
func (d *Decoder) Decode(n *yaml.Node, path string, v any) {
	d.value(n, path, reflect.ValueOf(v).Elem())
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an alias"
}

func (d *Decoder) value(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if path != "" {
		d.lines[path] = n.Line
	}
	if v.CanAddr() && v.Addr().Type().Implements(nodeDecoderType) {
		v.Addr().Interface().(NodeDecoder).DecodeNode(d, n, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return
		}
		nv := reflect.New(v.Type().Elem())
		d.value(n, path, nv.Elem())
		v.Set(nv)
	case reflect.Struct:
		d.structValue(n, path, v)
	case reflect.Slice:
		if d.nullKeeps && n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return
		}
		if n.Kind != yaml.SequenceNode {
			// A lone scalar where a list of scalars is expected is a
			// one-element list: "inputs: data/" reads as users mean it.
			if n.Kind == yaml.ScalarNode && v.Type().Elem().Kind() != reflect.Struct && n.Tag != "!!null" {
				s := reflect.MakeSlice(v.Type(), 1, 1)
				d.value(n, path+"[0]", s.Index(0))
				v.Set(s)
				return
			}
			d.Errorf(n, path, "want a list, got %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.value(c, fmt.Sprintf("%s[%d]", path, i), s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		if d.nullKeeps && n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return
		}
		if n.Kind != yaml.MappingNode {
			d.Errorf(n, path, "want a mapping, got %s", kindName(n))
			return
		}
		m := reflect.MakeMap(v.Type())
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			kv := reflect.New(v.Type().Key()).Elem()
			d.scalar(k, path, kv)
			vv := reflect.New(v.Type().Elem()).Elem()
			d.value(val, path+"."+k.Value, vv)
			m.SetMapIndex(kv, vv)
		}
		v.Set(m)
	default:
		d.scalar(n, path, v)
	}
}

func (d *Decoder) scalar(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.ScalarNode {
		d.Errorf(n, path, "want a %s, got %s", typeWord(v.Type()), kindName(n))
		return
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		// yaml.v3 truncates a float into an integer field (1.5 → 1):
		// a number with a fraction is not a whole number.
		if n.ShortTag() == "!!float" {
			var f float64
			if err := n.Decode(&f); err != nil || f != math.Trunc(f) || math.IsInf(f, 0) {
				d.Errorf(n, path, "want a %s, got %q", typeWord(v.Type()), n.Value)
				return
			}
		}
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		d.Errorf(n, path, "want a %s, got %q", typeWord(v.Type()), n.Value)
	}
}

func typeWord(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "boolean (true or false)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "non-negative whole number"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	}
	return t.String()
}

// fieldName returns the spec name of a struct field: its yaml tag, or ""
// for fields the spec does not expose.
func fieldName(f reflect.StructField) string {
	tag := f.Tag.Get("yaml")
	if tag == "-" || !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(tag, ",")
	return name
}

func (d *Decoder) structValue(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, path, "want a mapping, got %s", kindName(n))
		return
	}
	t := v.Type()
	byName := make(map[string]int, t.NumField())
	var names []string
	for i := 0; i < t.NumField(); i++ {
		if name := fieldName(t.Field(i)); name != "" {
			byName[name] = i
			names = append(names, name)
		}
	}
	seen := make(map[string]bool)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		fp := k.Value
		if path != "" {
			fp = path + "." + k.Value
		}
		idx, ok := byName[k.Value]
		if !ok {
			msg := "unknown field (allowed: " + strings.Join(names, ", ") + ")"
			if near := suggest.Nearest(k.Value, names); near != "" {
				msg += fmt.Sprintf("; did you mean %q?", near)
			}
			d.Errorf(k, fp, "%s", msg)
			continue
		}
		if seen[k.Value] {
			d.Errorf(k, fp, "given twice")
			continue
		}
		seen[k.Value] = true
		d.value(val, fp, v.Field(idx))
	}
}

// parseRoot parses data as one YAML (or JSON) document and returns its root
// node.
func parseRoot(file string, data []byte) (*yaml.Node, error) {
	root, err := parseDoc(file, data)
	if err == nil && root == nil {
		return nil, Errors{{File: file, Msg: "empty spec"}}
	}
	return root, err
}

// parseDoc parses data as one YAML (or JSON) document and returns its root
// node, nil for an empty document (nothing, or only comments).
func parseDoc(file string, data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line, msg := syntaxLine(strings.TrimPrefix(err.Error(), "yaml: "))
		return nil, Errors{{File: file, Line: line, Msg: "not valid YAML or JSON: " + msg}}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

// DecodeFile decodes data, one YAML (or JSON) document read from file, into
// v (a non-nil pointer to a struct with yaml tags) as a job spec is
// decoded: strictly, reporting every unknown key (with the nearest known
// one and the allowed ones), wrong type and key given twice as a
// FieldError with file, line and dotted key path, all of them together as
// Errors. Types of v's fields that implement NodeDecoder decode
// themselves. An empty document leaves v as it is, and so does a key given
// null (a section whose entries are all commented out): unlike in a job
// spec, where a list given null is an error. lastmiled's configuration is
// read with it.
func DecodeFile(file string, data []byte, v any) error {
	_, err := DecodeFileLines(file, data, v)
	return err
}

// DecodeFileLines is DecodeFile, and returns the line each field was
// given on, by its path ("peer.tls.ca"; absent: not given), for the
// checks a caller makes after decoding to name a line too.
func DecodeFileLines(file string, data []byte, v any) (map[string]int, error) {
	root, err := parseDoc(file, data)
	if err != nil || root == nil {
		return nil, err
	}
	d := newDecoder(file)
	d.nullKeeps = true
	d.Decode(root, "", v)
	return d.lines, d.Err()
}

// parserProblems are the syntax errors yaml.v3's parser (not its scanner)
// reports. It prints their lines counted from 0 (the mark of the construct
// the error is in, or of the token at fault): the line before the one at
// fault, as a user counts. Its scanner's lines are counted from 1.
var parserProblems = []string{
	"did not find expected key", "did not find expected node content",
	"did not find expected ',' or ']'", "did not find expected ',' or '}'",
	"did not find expected '-' indicator", "did not find expected <document start>",
	"did not find expected <stream-start>", "found undefined tag handle",
	"found duplicate %YAML directive", "found duplicate %TAG directive",
	"found incompatible YAML document",
}

// syntaxLine splits yaml.v3's "line N: problem" into the 1-based line
// (0: none given) and the problem, correcting the parser's 0-based lines.
func syntaxLine(msg string) (int, string) {
	rest, ok := strings.CutPrefix(msg, "line ")
	if !ok {
		return 0, msg
	}
	num, problem, ok := strings.Cut(rest, ": ")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n <= 0 {
		return 0, msg
	}
	if slices.Contains(parserProblems, problem) {
		n++
	}
	return n, problem
}

// asFieldErrors reports whether err consists of FieldErrors.
func asFieldErrors(err error) (Errors, bool) {
	var es Errors
	if errors.As(err, &es) {
		return es, true
	}
	return nil, false
}
