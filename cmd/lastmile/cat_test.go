package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCatBareNameListsRankRings: `lastmile cat NAME` of a job with one ring
// per rank says which rings exist instead of waiting for NAME.
func TestCatBareNameListsRankRings(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"lastmile.train.r0", "lastmile.train.r10", "lastmile.train.r1", "lastmile.train.rx",
		"lastmile.train.r01", ".lastmile.train.r2.tmp-1-2", "lastmile.trainer.r0"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	err := runCat(context.Background(), []string{"-dir", dir, "-wait", "10m", "lastmile.train"}, &out, &errb)
	if err == nil {
		t.Fatal("no error")
	}
	want := "no ring lastmile.train in " + dir + ", but 3 rings of its ranks (one per rank when world_size > 1): " +
		"lastmile.train.r0, lastmile.train.r1, lastmile.train.r10; read one: lastmile cat -dir " + dir + " lastmile.train.r0"
	if err.Error() != want {
		t.Errorf("error\n%s\nwant\n%s", err, want)
	}
	// Without rank rings the name is waited for as before.
	err = runCat(context.Background(), []string{"-dir", dir, "-wait", "0", "other"}, &out, &errb)
	if err == nil || strings.Contains(err.Error(), "rings of its ranks") {
		t.Errorf("error %v", err)
	}
}
