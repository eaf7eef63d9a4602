package daemon

import (
	"os"
	"path/filepath"
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

// TestValidateNamesLine: what Validate finds wrong after decoding (a
// value of the right type that is out of range, keys that need each
// other) names the file and line where the field, or the section holding
// it, was given, as decoding errors do. Before, only the key was named.
func TestValidateNamesLine(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, yaml, want string }{
		{"a field", "workers: 2\nstate_dir: relative/state\n", "lastmiled.yaml:2: config state_dir = relative/state: want an absolute path"},
		{"a nested field", "workers: 2\nlog:\n  level: info\n  format: xml\n", "lastmiled.yaml:4: config log.format = xml"},
		{"a section missing a key", "roots: {d: /data}\npeer:\n  listen: \":7941\"\n", "lastmiled.yaml:3: config peer.tls"},
		{"a default (not given)", "workers: 2\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "lastmiled.yaml")
			if err := os.WriteFile(path, []byte(c.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadConfig(path, false)
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.Validate()
			if c.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate: %v; want an error containing %q", err, c.want)
			}
		})
	}
}
