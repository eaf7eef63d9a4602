package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestS3AllowEveryGrantReported: every bad grant of s3.allow is reported,
// each at its own line and by its prefix (docs/daemon.md: every mistake at
// once, FILE:LINE: key: problem); only the first was, at the line of
// `allow:`, with the whole list printed as Go structs.
func TestS3AllowEveryGrantReported(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lastmiled.yaml")
	yaml := "s3:\n  allow:\n    - prefix: s3://bucket-one/x\n      users: [root]\n    - prefix: s3://bucket-two/y/\n      users: [no-such-user-lastmile]\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path, false)
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{"lastmiled.yaml:3: config s3.allow[0] = s3://bucket-one/x", "end it with '/'",
		"lastmiled.yaml:5: config s3.allow[1] = s3://bucket-two/y/", "no-such-user-lastmile"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "{") {
		t.Errorf("%q prints the grants as Go values", msg)
	}
}
