package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlagValueErrorNamesFlag: a value a flag gives that the config
// refuses is reported as the flag's, not at the line of the config file
// where the field it overrides was written: that line holds a good value,
// and pointing at it sends the operator to the wrong place.
func TestFlagValueErrorNamesFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lastmiled.yaml")
	if err := os.WriteFile(path, []byte("workers: 2\nstate_dir: /var/lib/lastmile\nlog:\n  level: info\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flags   []string
		notLine string
		want    string
	}{
		{[]string{"-state-dir", "relative"}, "lastmiled.yaml:2", "-state-dir"},
		{[]string{"-workers", "0"}, "lastmiled.yaml:1", "-workers"},
		{[]string{"-log-format", "xml"}, "lastmiled.yaml:", "-log-format"}, // not in the file: its section is
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"-config", path, "-check-config"}, c.flags...), &out, &errb)
		msg := errb.String()
		if code == 0 {
			t.Fatalf("%v: exit 0; want the value refused", c.flags)
		}
		if strings.Contains(msg, c.notLine) || !strings.Contains(msg, c.want) {
			t.Errorf("%v: %q; want it to name the flag %s, not %s", c.flags, msg, c.want, c.notLine)
		}
	}
}
