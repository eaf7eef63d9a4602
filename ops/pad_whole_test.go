package ops_test

import (
	"slices"
	"testing"
)

// docs/pipeline.md, sequence: "pad_value | 0 | the padding; must fit the
// element type". 1.5 does not fit an integer element type, yet it is
// accepted (and silently becomes something else); on a float list it
// should pad with 1.5.
func TestSequencePadValueFraction(t *testing.T) {
	b := batchOf(listcol("s", [][]int64{{7}}, nil))
	j, err := parseJob("", "- sequence: {column: s, length: 3, pad_value: 1.5}")
	if err != nil {
		return // rejected: fine
	}
	p := compile(t, b, "", "- sequence: {column: s, length: 3, pad_value: 1.5}")
	_ = j
	got := fixedRows(t, run(t, p, b), "s")
	t.Errorf("pad_value 1.5 on an int64 list accepted; rows %v", got)
	_ = slices.Equal[[]int64]
}
