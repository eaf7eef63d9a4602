package bench

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/datagen"
)

// readyWriter cancels a context once the contender says it computes.
type readyWriter struct {
	cancel context.CancelFunc
	got    strings.Builder
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.got.Write(p)
	w.cancel()
	return len(p), nil
}

// TestContend: the contender computes the spill measurement's units over
// data laid out as RunSpill makes it, says so once, and stops with its
// context.
func TestContend(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gc := datagen.DefaultConfig()
	gc.Rows, gc.Files = 20000, 1
	if _, err := datagen.Write(ctx, filepath.Join(dir, "parquet"), gc); err != nil {
		t.Fatal(err)
	}
	if err := datagen.WriteSpamUsers(ctx, filepath.Join(dir, "spam.parquet"), gc, 0.02); err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	w := &readyWriter{cancel: stop}
	if err := contend(cctx, "../examples/ctr-8rank.yaml", dir, w); err != nil {
		t.Fatal(err)
	}
	if w.got.String() != "computing\n" {
		t.Errorf("the contender wrote %q", w.got.String())
	}
	if err := contend(ctx, "../examples/ctr-8rank.yaml", filepath.Join(dir, "missing"), w); err == nil {
		t.Error("a contender without data: no error")
	}
}
