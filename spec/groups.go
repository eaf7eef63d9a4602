package spec

import (
	"fmt"
	"unicode/utf8"
)

// MaxGroupColumns bounds the columns of a stack and the keys of a jagged
// group (the ring's limit on a jagged field's keys).
const MaxGroupColumns = 4096

// maxKeyLen is the ring's limit on a key's name (docs/ring-format.md 4.1).
const maxKeyLen = 63

type badFunc func(field, format string, args ...any)

// validateStack checks a stack op and fills in its defaults.
func validateStack(s *Stack, bad badFunc) {
	if s.Output == "" {
		bad("output", "required: the name of the [B, N] column, e.g. dense")
	}
	if len(s.Columns) == 0 || len(s.Columns) > MaxGroupColumns {
		bad("columns", "want 1 to %d numeric columns to stack, got %d", MaxGroupColumns, len(s.Columns))
	}
	seen := map[string]bool{}
	for i, c := range s.Columns {
		if seen[c] {
			bad(fmt.Sprintf("columns[%d]", i), "column %q listed twice; a column is stacked once", c)
		}
		seen[c] = true
	}
	if s.DType == "" {
		s.DType = "float32"
	}
	switch s.DType {
	case "float32", "bfloat16", "int64":
	default:
		bad("dtype", "want float32, bfloat16 or int64, got %q", s.DType)
	}
	validateGroupNulls(&s.Nulls, bad)
}

// validateGroupNulls checks a group's nulls policy: error (the default)
// or fill, as the nulls op's.
func validateGroupNulls(p *string, bad badFunc) {
	if *p == "" {
		*p = "error"
	}
	if *p != "error" && *p != "fill" {
		bad("nulls", "want error or fill, got %q (to drop rows with nulls, put a nulls op with policy skip before this one)", *p)
	}
}

// validateJagged checks a jagged op and fills in its defaults.
func validateJagged(j *Jagged, bad badFunc) {
	if j.Output == "" {
		bad("output", "required: the name of the KeyedJaggedTensor, e.g. sparse")
	}
	if len(j.Keys) == 0 || len(j.Keys) > MaxGroupColumns {
		bad("keys", "want 1 to %d keys (a column name, or {column, key, max_length, truncate, hash_mod, weights}), got %d", MaxGroupColumns, len(j.Keys))
	}
	seen, weights := map[string]int{}, map[string]int{}
	for i := range j.Keys {
		k := &j.Keys[i]
		p := fmt.Sprintf("keys[%d]", i)
		if first, dup := weights[k.Weights]; dup && k.Weights != "" {
			bad(p+".weights", "column %q also weighs keys[%d]; a list weighs one key", k.Weights, first)
		}
		weights[k.Weights] = i
		if k.Column == "" {
			bad(p+".column", "required: the list or scalar categorical column")
			continue
		}
		if k.Key == "" {
			k.Key = k.Column
		}
		if len(k.Key) > maxKeyLen || !utf8.ValidString(k.Key) {
			bad(p+".key", "key %q is longer than %d bytes (the ring's limit); give it a shorter key", k.Key, maxKeyLen)
		}
		if first, dup := seen[k.Key]; dup {
			bad(p+".key", "key %q is also keys[%d]; give one of them another key", k.Key, first)
		}
		seen[k.Key] = i
		if k.MaxLength < 0 {
			bad(p+".max_length", "want 0 (no bound) or more, got %d", k.MaxLength)
		}
		if k.Truncate == "" {
			k.Truncate = "left"
		}
		if k.Truncate != "left" && k.Truncate != "right" {
			bad(p+".truncate", "want left (keep the last elements) or right, got %q", k.Truncate)
		}
		if k.HashMod < 0 {
			bad(p+".hash_mod", "want 0 (no hashing) or a modulus >= 1, got %d", k.HashMod)
		}
		if k.Weights != "" && k.Weights == k.Column {
			bad(p+".weights", "column %q is the key's own ids; weights name the list beside them (e.g. scores.value for scores.key)", k.Weights)
		}
	}
	validateGroupNulls(&j.Nulls, bad)
}
