package spec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/spec"
)

// TestNames checks that no job or ring name can name a file outside its
// directory: ValidName and Parse agree, and Parse names the field.
func TestNames(t *testing.T) {
	long := strings.Repeat("a", spec.MaxNameLen)
	cases := []struct {
		name string
		ok   bool
		why  string // substring of ValidName's error
	}{
		{"ctr", true, ""},
		{"ctr-8rank_v2.1", true, ""},
		{"a..b", true, ""},
		{"9", true, ""},
		{long, true, ""},
		{long + "a", false, "129 bytes long"},
		{"", false, "empty"},
		{".", false, "starting with a letter or digit"},
		{"..", false, "starting with a letter or digit"},
		{"../etc/passwd", false, "'/' or a NUL"},
		{"a/b", false, "'/' or a NUL"},
		{"a/../../b", false, "'/' or a NUL"},
		{"/abs", false, "'/' or a NUL"},
		{"a\x00b", false, "'/' or a NUL"},
		{".hidden", false, "want 1 to 128"},
		{"-rf", false, "want 1 to 128"},
		{"sp ace", false, "want 1 to 128"},
		{"tab\t", false, "want 1 to 128"},
		{"new\nline", false, "want 1 to 128"},
		{"ctr\n", false, "want 1 to 128"},
		{"ünï", false, "want 1 to 128"},
		{`a\b`, false, "want 1 to 128"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := spec.ValidName(tc.name)
			if (err == nil) != tc.ok {
				t.Fatalf("ValidName(%q) = %v, want ok %v", tc.name, err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), tc.why) {
				t.Errorf("ValidName(%q) = %q, want it to say %q", tc.name, err, tc.why)
			}
			if rerr := spec.ValidRingName(tc.name); (rerr == nil) != (tc.ok || tc.name == long+"a") {
				t.Errorf("ValidRingName(%q) = %v", tc.name, rerr)
			}
			if tc.name == "" {
				return // Parse gives an empty name its default
			}
			parseNames(t, "name", tc.name, tc.ok)
			parseNames(t, "ring.name", tc.name, spec.ValidRingName(tc.name) == nil)
		})
	}
	// The longest ring name with a rank suffix still fits the ring format.
	long160 := strings.Repeat("r", spec.MaxRingNameLen)
	parseNames(t, "ring.name", long160, true)
	parseNames(t, "ring.name", long160+"r", false)
	j, err := spec.Parse("", []byte(`{"inputs": ["/d"], "batch": {"size": 1}, "world_size": 4096, "name": "`+long+`"}`))
	if err != nil || len(j.RingName(4095)) > 200 {
		t.Errorf("longest name with 4096 ranks: %v", err)
	}
}

// parseNames parses a spec with field (name or ring.name) set to v and
// checks that it is accepted, or refused with an error naming that field
// only.
func parseNames(t *testing.T, field, v string, ok bool) {
	t.Helper()
	src := `{"inputs": ["/d"], "batch": {"size": 1}, "name": ` + quoteJSON(v) + `}`
	if field == "ring.name" {
		src = `{"inputs": ["/d"], "batch": {"size": 1}, "ring": {"name": ` + quoteJSON(v) + `}}`
	}
	_, err := spec.Parse("", []byte(src))
	if ok != (err == nil) {
		t.Fatalf("%s %q: Parse: %v, want ok %v", field, v, err, ok)
	}
	if err == nil {
		return
	}
	var es spec.Errors
	if !errors.As(err, &es) || len(es) != 1 || es[0].Field != field {
		t.Errorf("%s %q: Parse error %v: want one error, naming %s", field, v, err, field)
	}
}

func quoteJSON(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
