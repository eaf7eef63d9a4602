package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestUsage: lastmiled -h says what the daemon is, where its
// configuration and manual are, and prints no default twice.
func TestUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-h"}, &out, &errb); code != 0 {
		t.Fatalf("lastmiled -h exited %d", code)
	}
	help := errb.String()
	for _, want := range []string{"per-host data service", "/etc/lastmile/lastmiled.yaml", "docs/daemon.md", "-shm-dir"} {
		if !strings.Contains(help, want) {
			t.Errorf("lastmiled -h lacks %q:\n%s", want, help)
		}
	}
	for _, line := range strings.Split(help, "\n") {
		if strings.Count(line, "(default") > 1 {
			t.Errorf("default printed twice: %q", line)
		}
	}
}
