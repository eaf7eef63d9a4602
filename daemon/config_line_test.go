package daemon

import (
	"strings"
	"testing"
)

// TestConfigErrorNamesLine: a YAML type error names its line ("line
// 1: cannot unmarshal !!str `many` into int"), but a bad duration or size
// (Duration.UnmarshalYAML, Bytes.UnmarshalYAML return the bare Set error)
// names neither the key nor the line: with a dozen duration keys and as
// many sizes, "parse config: want a duration such as 30s or 10m, got
// \"10\"" leaves the operator to search the file. Errors are now a job
// spec's ("LINE: key.path: problem", with FILE: first when read from a
// file), so the test wants the line and the key.
func TestConfigErrorNamesLine(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"workers: 2\ngrace: 10\n", "2: grace: want a duration"},
		{"workers: 2\nmemory:\n  per_job: 8XB\n", "3: memory.per_job: want a size"},
		{"workers: 2\ncontrol:\n  body_timeout: 5\n", "3: control.body_timeout: want a duration"},
	} {
		_, err := ParseConfig(strings.NewReader(c.yaml))
		if err == nil {
			t.Fatalf("%q: no error", c.yaml)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %q does not say %q", c.yaml, err, c.want)
		}
	}
}
