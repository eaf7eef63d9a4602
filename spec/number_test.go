package spec

import (
	"strings"
	"testing"
)

// TestNumberKeepsIntegers: a fill written as an integer is kept exactly
// (a float64 rounds 2^53+1 to 2^53), a float stays a float, and the
// number renders back as it was read.
func TestNumberKeepsIntegers(t *testing.T) {
	for _, c := range []struct {
		fill string
		want Number
	}{
		{"9007199254740993", Number{F: 9007199254740992, I: 9007199254740993, Int: true}},
		{"9223372036854775807", Number{F: 9223372036854775807, I: 9223372036854775807, Int: true}},
		{"-9223372036854775808", Number{F: -9223372036854775808, I: -9223372036854775808, Int: true}},
		{"-1", Number{F: -1, I: -1, Int: true}},
		{"1.5", Number{F: 1.5}},
		{"1e3", Number{F: 1000, I: 1000, Int: true}},
		{"1e300", Number{F: 1e300}},
	} {
		src := "name: n\ninputs: [x]\nbatch: {size: 1}\npipeline:\n  - nulls: {policy: fill, fill: " + c.fill + "}\n"
		job, err := Parse("job.yaml", []byte(src))
		if err != nil {
			t.Fatalf("fill %s: %v", c.fill, err)
		}
		got := job.Pipeline[0].Nulls.Fill
		if got != c.want {
			t.Errorf("fill %s: %+v, want %+v", c.fill, got, c.want)
		}
		out, err := job.Marshal()
		if err != nil || !strings.Contains(string(out), "fill: "+got.String()) && !strings.Contains(string(out), "fill: "+c.fill) {
			t.Errorf("fill %s: rendered %s (%v)", c.fill, out, err)
		}
	}
	if _, err := Parse("job.yaml", []byte("name: n\ninputs: [x]\nbatch: {size: 1}\npipeline:\n  - nulls: {policy: fill, fill: abc}\n")); err == nil || !strings.Contains(err.Error(), "want a number") {
		t.Errorf("fill abc: %v, want a number error", err)
	}
}
