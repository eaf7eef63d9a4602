package spec_test

import (
	"strings"
	"testing"

	"github.com/lastmile/lastmile/spec"
)

// A number with a fraction given for a whole-number field must be an
// error ("every error names the field"), not silently truncated: yaml.v3
// decodes 1.5 into an int64 as 1.
func TestFractionInWholeNumberField(t *testing.T) {
	cases := []struct{ line, field string }{
		{"pipeline:\n  - sequence: {column: s, length: 64.9}\n", "length"},
		{"pipeline:\n  - map: {h: x}\n  - jagged: {output: g, keys: [{column: c, hash_mod: 1000003.5}]}\n", "hash_mod"},
		{"world_size: 2.5\n", "world_size"},
	}
	for _, c := range cases {
		src := "version: 1\ninputs: [x]\nbatch: {size: 8}\n" + c.line
		_, err := spec.Parse("job.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%q: error %v, want one naming %s", c.line, err, c.field)
		}
	}
	// whole numbers written as floats stay allowed
	src := "version: 1\ninputs: [x]\nbatch: {size: 8.0}\n"
	if _, err := spec.Parse("job.yaml", []byte(src)); err != nil {
		t.Errorf("size 8.0: %v", err)
	}
}
