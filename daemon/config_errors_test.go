package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigMistakes: a mistake in lastmiled.yaml is reported as a job
// spec's is: FILE:LINE: key.path: what is wrong, with the nearest known
// key and the section's keys for an unknown one, and no Go type names
// (rv-docs-findings 8: "field socket_mod not found in type
// daemon.Config", "cannot unmarshal !!str `two` into int").
func TestConfigMistakes(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown top-level key", "workers: 2\nsocket_mod: \"0660\"\n", []string{
			`lastmiled.yaml:2: socket_mod: unknown field`, `did you mean "socket_mode"?`, "allowed: socket, socket_mode, socket_group,",
		}},
		{"unknown nested key", "memory:\n  total: 8GiB\n  per_jobs: 1GiB\n", []string{
			`lastmiled.yaml:3: memory.per_jobs: unknown field`, `did you mean "per_job"?`, "(allowed: per_job, total)",
		}},
		{"unknown key deeper", "peers:\n  tls: {ca: /x, crt: /y}\n", []string{
			`lastmiled.yaml:2: peers.tls.crt: unknown field`,
		}},
		{"unknown key, nothing near", "xyzzy: 1\n", []string{
			`lastmiled.yaml:1: xyzzy: unknown field (allowed: socket,`,
		}},
		{"wrong type", "workers: two\n", []string{
			`lastmiled.yaml:1: workers: want a whole number, got "two"`,
		}},
		{"wrong kind", "log: debug\n", []string{
			`lastmiled.yaml:1: log: want a mapping, got "debug"`,
		}},
		{"bad duration", "control:\n  body_timeout: 5\n", []string{
			`lastmiled.yaml:2: control.body_timeout: want a duration such as 30s or 10m, got "5"`,
		}},
		{"bad size", "memory:\n  per_job: 8XB\n", []string{
			`lastmiled.yaml:2: memory.per_job:`,
		}},
		{"finding 8, both at once", "socket_mod: \"0660\"\nworkers: two\n", []string{
			`lastmiled.yaml:1: socket_mod: unknown field`, `did you mean "socket_mode"?`,
			`lastmiled.yaml:2: workers: want a whole number, got "two"`,
		}},
		{"not YAML", "workers: [1\n", []string{`lastmiled.yaml:`, "not valid YAML"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "lastmiled.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadConfig(path, false)
			if err == nil {
				t.Fatalf("%q: no error", tc.yaml)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q: error\n%s\ndoes not say %q", tc.yaml, msg, w)
				}
			}
			for _, leak := range []string{"daemon.", "!!", "unmarshal", "int64", "parse config"} {
				if strings.Contains(msg, leak) {
					t.Errorf("%q: error\n%s\nsays %q", tc.yaml, msg, leak)
				}
			}
			if n := strings.Count(msg, path); n != strings.Count(msg, "\n")+1 {
				t.Errorf("%q: error\n%s\nnames the file %d times, want once a line", tc.yaml, msg, n)
			}
		})
	}
}

// TestConfigNullSections: a key given nothing (every entry of a section
// commented out, as in deploy/lastmiled.yaml) keeps its default, as it did
// before config errors were reported as a spec's.
func TestConfigNullSections(t *testing.T) {
	c, err := ParseConfig(strings.NewReader("weights:\nroots:\npeers:\n  addrs:\ns3:\n  allow:\ngrace:\nworkers:\nmemory:\n"))
	def := DefaultConfig()
	if err != nil || c.Weights != nil || c.Peers.Addrs != nil || c.Grace != def.Grace || c.Workers != def.Workers || c.Memory != def.Memory {
		t.Errorf("null sections: %+v, %v", c, err)
	}
}
