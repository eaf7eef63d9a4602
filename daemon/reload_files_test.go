package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestReloadWarnsOfMissingRoot: a reload whose file changes a key that
// needs a restart into one the start would fail on warns so, for a data
// root that does not exist as for a value out of range (docs/daemon.md:
// "fix the file before restarting"); it warned of Validate's errors only,
// and the next restart failed on "roots: data root ... no such file".
func TestReloadWarnsOfMissingRoot(t *testing.T) {
	d := apiDaemon(t, nil)
	var logs bytes.Buffer
	d.log = slog.New(slog.NewTextHandler(&logs, nil))
	cfg := d.Config()
	cfg.Roots = map[string]string{"ctr": "/nonexistent/lastmile-root"}
	ignored, err := d.Reload(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ignored) != 1 || ignored[0] != "roots" {
		t.Fatalf("not reloaded: %v, want [roots]", ignored)
	}
	if l := logs.String(); !strings.Contains(l, "would not let lastmiled start") || !strings.Contains(l, "/nonexistent/lastmile-root") {
		t.Fatalf("no warning that the root would keep lastmiled from starting:\n%s", l)
	}
}
