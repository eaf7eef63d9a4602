package spec

import (
	"strings"
	"testing"
)

// TestYAMLSyntaxErrorLine: for its parser's syntax errors gopkg.in/yaml.v3
// reports the line before the one at fault (its marks count from 0, and
// are printed as is), and Parse passed the message on: an unclosed list on
// line 5 read "line 4: did not find expected ',' or ']'", and an
// over-indented key on line 4 "line 3: did not find expected key". A user
// editing the line named finds nothing wrong there. The line now comes in
// the FILE:LINE: form of every other spec error; the scanner's errors (a
// tab) were right and stay so.
func TestYAMLSyntaxErrorLine(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"version: 1\nname: t\nbatch: {size: 10}\nepochs: 1\ninputs: [a\n", "job.yaml:5: "},
		{"version: 1\nname: t\nbatch: {size: 10}\n  epochs: 1\ninputs: [a]\n", "job.yaml:4: "},
		{"version: 1\nname: t\nbatch: {size: 10}\nepochs: 1\ninputs: [a]\n\tring: {}\n", "job.yaml:6: "},
	} {
		_, err := Parse("job.yaml", []byte(c.src))
		if err == nil {
			t.Fatalf("%q parsed", c.src)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want the error at %s", c.src, err, c.want)
		}
	}
}
