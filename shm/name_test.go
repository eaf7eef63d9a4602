package shm_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/shm"
)

// TestRingNames: every entry point that turns a ring name into a path in
// the ring directory refuses a name that could leave it.
func TestRingNames(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Dir(dir)
	for _, tc := range []struct {
		name string
		why  string
	}{
		{"", "1 to 200 bytes"},
		{strings.Repeat("r", shm.MaxRingNameLen+1), "1 to 200 bytes"},
		{".", "must not start with '.'"},
		{"..", "must not start with '.'"},
		{"../x", "must not start with '.'"},
		{".hidden", "must not start with '.'"},
		{"a/b", "is not one of"},
		{"a/../../" + filepath.Base(outside), "is not one of"},
		{"/etc/passwd", "is not one of"},
		{"a\x00b", "is not one of"},
		{"a b", "is not one of"},
		{"ünï", "is not one of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, oerr := shm.Open(dir, tc.name)
			_, ierr := shm.Inspect(dir, tc.name)
			for what, err := range map[string]error{"Open": oerr, "Inspect": ierr} {
				if err == nil || !strings.Contains(err.Error(), tc.why) {
					t.Errorf("%s(%q) = %v, want an error saying %q", what, tc.name, err, tc.why)
				}
			}
		})
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files made in the ring directory: %v", ents)
	}
}
