package spec

import (
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Number is a number of a spec that may fill an integer column (nulls and
// stack's fill): an integer written in the spec is kept exactly, which a
// float64 does not do beyond 2^53 (9007199254740993 would fill
// 9007199254740992), and the int64 extremes stay in range.
type Number struct {
	F float64 // the value as a float64 (rounded, for a large integer)
	I int64   // the value exactly, where Int
	// Int: written as a whole number that fits int64 (8, -3, 1e3 is not).
	Int bool
}

// Num returns the Number of a float64 (Int where it is a whole number
// that a float64 holds exactly).
func Num(f float64) Number {
	n := Number{F: f}
	if f == math.Trunc(f) && math.Abs(f) <= 1<<53 {
		n.I, n.Int = int64(f), true
	}
	return n
}

// DecodeNode implements NodeDecoder: a YAML integer or float.
func (n *Number) DecodeNode(d *Decoder, node *yaml.Node, path string) {
	if node.Kind != yaml.ScalarNode || node.Tag == "!!null" {
		d.Errorf(node, path, "want a number, got %s", kindName(node))
		return
	}
	s := strings.ReplaceAll(node.Value, "_", "")
	if i, err := strconv.ParseInt(s, 0, 64); err == nil && node.ShortTag() == "!!int" {
		*n = Number{F: float64(i), I: i, Int: true}
		return
	}
	var f float64
	if err := node.Decode(&f); err != nil || node.ShortTag() != "!!int" && node.ShortTag() != "!!float" {
		d.Errorf(node, path, "want a number, got %q", node.Value)
		return
	}
	*n = Num(f)
}

// String is the number as written: the exact integer, or the float.
func (n Number) String() string {
	if n.Int {
		return strconv.FormatInt(n.I, 10)
	}
	return strconv.FormatFloat(n.F, 'g', -1, 64)
}

// MarshalYAML writes the number as a scalar, exactly as it was read.
func (n Number) MarshalYAML() (any, error) {
	if n.Int {
		return n.I, nil
	}
	return n.F, nil
}

// MarshalJSON writes the number as a JSON number, exactly as it was read.
func (n Number) MarshalJSON() ([]byte, error) { return []byte(n.String()), nil }

// Whole returns the number as an int64 and true where it is a whole number
// in int64's range: exactly as written for an integer, else the float's
// value (the zero Number, a fill left out, is 0).
func (n Number) Whole() (int64, bool) {
	if n.Int {
		return n.I, true
	}
	f := n.F
	if f != math.Trunc(f) || math.IsInf(f, 0) || f < -(1<<63) || f >= 1<<63 {
		return 0, false
	}
	return int64(f), true
}
