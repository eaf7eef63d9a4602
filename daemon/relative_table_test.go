package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// TestRelativeSideTableReadAsSubmitter: parseSpec refuses relative
// inputs (they would be resolved against lastmiled's own working
// directory), but not a relative join table. Without base_dir it stays
// relative, and the submitter's thread opens it from the daemon's
// working directory: the kernel checks search permission from there
// down, never on the directories above it. A daemon started from a
// directory beneath one the user may not search (a 0700 home) reads the
// files there for that user, who could not open them by any absolute
// path. Each case is checked as uid 65534 would be at submission.
func TestRelativeSideTableReadAsSubmitter(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to read as another uid")
	}
	const nobody = 65534
	top := t.TempDir()
	os.Chmod(filepath.Dir(top), 0o755)
	os.Chmod(top, 0o755)
	// The input: readable by anyone.
	pub := filepath.Join(top, "pub")
	os.Mkdir(pub, 0o755)
	input := filepath.Join(pub, "in.parquet")
	copyTo(t, "../testdata/small/part-00000.parquet", input)
	// The side table: 0644 in a 0755 directory, beneath a 0700 one.
	private := filepath.Join(top, "private")
	os.Mkdir(private, 0o700)
	cwd := filepath.Join(private, "work")
	os.Mkdir(cwd, 0o755)
	copyTo(t, "../testdata/small/part-00002.parquet", filepath.Join(cwd, "side.parquet"))
	t.Chdir(cwd) // lastmiled started from there

	d := apiDaemon(t, nil)
	p := peer{uid: nobody, gid: nobody, ok: true}
	for _, c := range []struct{ name, table string }{
		{"absolute", filepath.Join(cwd, "side.parquet")},
		{"relative to lastmiled's working directory", "side.parquet"},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := fmt.Sprintf("inputs: [%s]\nbatch: {size: 10}\npipeline:\n  - join: {kind: anti, table: %s, on: row_id}\n", input, c.table)
			job, err := d.parseSpec(text, "", "", 0)
			if err == nil {
				err = d.checkJob(context.Background(), p, job, nil)
			}
			if err == nil {
				t.Fatalf("uid %d's job with side table %s (under a 0700 directory) was accepted: lastmiled read the table for a user who may not open it", nobody, c.table)
			}
			var ae *apiError
			if c.table[0] == '/' && (!errors.As(err, &ae) || ae.status != http.StatusForbidden) {
				t.Errorf("absolute side table under a 0700 directory: %v, want a 403", err)
			}
			t.Logf("refused: %v", err)
		})
	}
}

func copyTo(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
