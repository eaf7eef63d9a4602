package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestStatusRestartNeeded: `lastmile status` says which changed config
// keys a reload could not apply (GET /v1/status restart_needed), and says
// nothing of the kind when there are none.
func TestStatusRestartNeeded(t *testing.T) {
	var st apiStatus
	var out bytes.Buffer
	if err := printStatus(&out, &st); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "restart needed") {
		t.Errorf("no pending key, yet:\n%s", out.String())
	}
	st.RestartNeeded = []string{"roots", "peer.listen"}
	out.Reset()
	if err := printStatus(&out, &st); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "restart needed") || !strings.Contains(out.String(), "roots, peer.listen") {
		t.Errorf("status does not name the keys that need a restart:\n%s", out.String())
	}
}
