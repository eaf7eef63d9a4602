package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/datagen"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

// TestEndlessJobOverNothing: a job whose inputs hold no rows plans no
// unit. With epochs: 0 its epochs came one after another with nothing in
// them: a core spun for ever (deaf to its context too, until the epoch
// loop checked it), and in the daemon a trainer waited on a job that
// looked alive. It now fails at once, saying why; with epochs it simply
// ends.
func TestEndlessJobOverNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := datagen.DefaultConfig()
	cfg.Rows, cfg.Files = 0, 1
	if _, err := datagen.Write(context.Background(), dir, cfg); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		epochs string
		err    string
	}{
		{"0", "nothing to read"},
		{"2", ""},
	} {
		t.Run("epochs "+c.epochs, func(t *testing.T) {
			src := fmt.Sprintf("name: nothing\ninputs: [%s]\ncolumns: [row_id]\nbatch: {size: 10}\nepochs: %s\nring: {dir: %s}\n", dir, c.epochs, t.TempDir())
			job, err := spec.Parse("", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = engine.Run(ctx, job, engine.Options{Remove: true})
			switch {
			case c.err == "" && err != nil:
				t.Fatalf("epochs %s over no rows: %v, want it to end", c.epochs, err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("epochs %s over no rows: %v, want an error saying %q", c.epochs, err, c.err)
			case ctx.Err() != nil:
				t.Fatalf("epochs %s over no rows ran until the test's deadline", c.epochs)
			}
		})
	}
}
