package daemon

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports keeps the layering: daemon builds on the engine and the
// leaves, and never on a command.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/lastmile/lastmile/daemon").Output()
	if err != nil {
		t.Skip("go list unavailable:", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/lastmile/lastmile/cmd/") || p == "github.com/lastmile/lastmile/bench" {
			t.Errorf("daemon depends on %s", p)
		}
	}
}
