package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestHelp: no command's -h prints a default twice or a hidden flag; the
// ring directory flag is -shm-dir wherever there is one; bench -h names
// everything bench measures.
func TestHelp(t *testing.T) {
	for _, c := range commands() {
		if c.name == "version" {
			continue
		}
		var out, errb bytes.Buffer
		if code := run(context.Background(), []string{c.name, "-h"}, &out, &errb); code != 0 {
			t.Errorf("lastmile %s -h exited %d: %s", c.name, code, errb.String())
			continue
		}
		help := errb.String()
		for _, line := range strings.Split(help, "\n") {
			if strings.Count(line, "(default") > 1 {
				t.Errorf("lastmile %s -h: default printed twice: %q", c.name, line)
			}
		}
		for _, hidden := range []string{"  -dir string", "  -remove", "  -handoff-consumer", "  -spill-peer", "internal:"} {
			if c.name != "certs" && strings.Contains(help, hidden) {
				t.Errorf("lastmile %s -h shows %q", c.name, hidden)
			}
		}
		if (c.name == "cat" || c.name == "bench") && !strings.Contains(help, "  -shm-dir string") {
			t.Errorf("lastmile %s -h lacks -shm-dir:\n%s", c.name, help)
		}
		if c.name == "bench" {
			for _, want := range []string{"(a) memcpy", "(d) decompression", "(e) the -pipeline spec", "(f) rows/s", "(g) the\n            trainer's CPU", "spill     the -spill-pipeline", "-only"} {
				if !strings.Contains(help, want) {
					t.Errorf("lastmile bench -h lacks %q", want)
				}
			}
		}
	}
}
