package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

// TestSharedDataFileSpellings: the check that refuses a table's data file
// named again by another input goes by the file and the snapshot, not by
// how an input spells them. The same metadata file and snapshot spelled
// twice (a file:// URL and its path, a doubled slash) agrees with itself
// and runs, read once; a plain input that names a data file by another
// spelling of its path ("dir//file", "dir/./file") is refused as the
// file's own spelling is.
func TestSharedDataFileSpellings(t *testing.T) {
	del := func(id int64) bool { return id%4 == 1 && id%3 == 0 }
	tab, meta := deletesTableEq(t, del)
	p, ok := tab.Locate(9)
	if !ok {
		t.Fatal("id 9 not written")
	}
	file := strings.TrimPrefix(p.File, "file://")
	dir, base := filepath.Split(file)
	mdir, mbase := filepath.Split(meta)
	table := "iceberg:" + meta
	for _, tc := range []struct {
		name string
		ins  []string
		want string // in the error; "" runs the job
	}{
		{"the table as a file:// URL and as a path", []string{table, "iceberg:file://" + meta}, ""},
		{"the table with a doubled slash", []string{table, "iceberg:" + mdir + "/" + mbase}, ""},
		{"the file with a doubled slash", []string{table, dir + "/" + base}, "a data file of Iceberg table"},
		{"the file through ./", []string{table, dir + "./" + base}, "a data file of Iceberg table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			var q []string
			for _, in := range tc.ins {
				q = append(q, fmt.Sprintf("%q", in))
			}
			src := fmt.Sprintf("inputs: [%s]\nbatch: {size: 64, last: keep}\nring: {dir: %q, name: t, slots: 4}\ncolumns: [id, key]\n", strings.Join(q, ", "), out)
			if tc.want == "" {
				_, got := runRowsStats(t, src, out)
				if n, kept := len(got["id"]), 2000-countDeleted(del); n != kept {
					t.Fatalf("%d rows; want the table's %d kept rows once", n, kept)
				}
				return
			}
			job, err := spec.Parse("test.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			// A job not refused runs until its ring, which nothing reads,
			// fills: bounded, so that a miss fails rather than hangs.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err = engine.Run(ctx, job, engine.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want one containing %q", err, tc.want)
			}
		})
	}
}
