package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReloadDespiteBadRestartKeys: a SIGHUP whose file changes a key that
// needs a restart into one the daemon could not start with (peer.listen
// without tls and roots) still applies the reloadable keys, and warns that
// the file must be fixed before restarting (docs/daemon.md,
// "Configuration"); it is not refused as a whole.
func TestReloadDespiteBadRestartKeys(t *testing.T) {
	e := newEnv(t)
	e.start()
	os.WriteFile(filepath.Join(e.dir, "lastmiled.yaml"), []byte("grace: 7m\npeer:\n  listen: \":7941\"\n"), 0o644)
	e.signal(syscall.SIGHUP)
	waitFor(t, "reload logged", 10*time.Second, func() bool {
		l := e.log.String()
		return strings.Contains(l, "configuration not reloaded") || strings.Contains(l, "configuration reloaded")
	})
	time.Sleep(100 * time.Millisecond)
	l := e.log.String()
	if strings.Contains(l, "configuration not reloaded") || !strings.Contains(l, "grace=7m0s") {
		t.Fatalf("SIGHUP with an invalid peer.listen refused the reloadable grace; want it applied and a warning")
	}
	if !strings.Contains(l, "would not let lastmiled start") || !strings.Contains(l, "peer.listen") {
		t.Fatalf("no warning that peer.listen as written would keep lastmiled from starting")
	}
}
