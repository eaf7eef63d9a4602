package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

// TestSharedDataFileRefused: a data file of an Iceberg table that
// another input also names is refused before anything is read. A file
// is planned once, and the two inputs disagree on what it holds: the
// table reads it without the rows its snapshot deletes, a plain input
// reads it whole (and two snapshots delete different rows). Before,
// whichever came first, the file was read once with the table's
// deletes: a plain input's deleted rows went missing without a word.
// The same table at the same snapshot named twice is read once, however
// it is spelled; a plain input spelling a data file's path otherwise
// ("dir//file", "dir/./file") is refused as the file's own spelling is,
// and so is one reaching the file through a symlink (to it or to its
// directory) or a hard link: local files are compared by device and
// inode, not by name.
func TestSharedDataFileRefused(t *testing.T) {
	del := func(id int64) bool { return id%4 == 1 && id%3 == 0 }
	tab, meta := deletesTableEq(t, del)
	p, ok := tab.Locate(9)
	if !ok {
		t.Fatal("id 9 not written")
	}
	file := strings.TrimPrefix(p.File, "file://")
	// The same table before its deletes: snapshot 1 (see deletesTableEq).
	before := fmt.Sprintf("iceberg:%s?snapshot=%d", meta, firstSnapshot(t, meta))
	table := "iceberg:" + meta
	fdir, fbase := filepath.Split(file)
	mdir, mbase := filepath.Split(meta)
	links := t.TempDir()
	symlink, hardlink, dirlink := filepath.Join(links, "sym.parquet"), filepath.Join(links, "hard.parquet"), filepath.Join(links, "dir")
	if err := os.Symlink(file, symlink); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(file, hardlink); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fdir, dirlink); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ins  []string
		want string // in the error; "" runs the job
	}{
		{"the file, then its table", []string{file, table}, "the input " + fmt.Sprintf("%q", file) + " is a data file of Iceberg table"},
		{"the table, then the file", []string{table, file}, "is a data file of Iceberg table"},
		{"the file's directory", []string{filepath.Dir(file), table}, "reaches " + filepath.Dir(file) + "/"},
		{"a glob", []string{filepath.Join(filepath.Dir(file), "*.parquet"), table}, "reaches " + filepath.Dir(file) + "/"},
		{"two snapshots", []string{before, table}, "and to " + table},
		{"the same snapshot twice", []string{table, table}, ""},
		// By the file and the snapshot, not by how an input spells them.
		{"the table as a file:// URL and as a path", []string{table, "iceberg:file://" + meta}, ""},
		{"the table with a doubled slash", []string{table, "iceberg:" + mdir + "/" + mbase}, ""},
		{"the file with a doubled slash", []string{table, fdir + "/" + fbase}, "a data file of Iceberg table"},
		{"the file through ./", []string{table, fdir + "./" + fbase}, "a data file of Iceberg table"},
		{"a symlink to the file", []string{table, symlink}, fmt.Sprintf("the input %q is %s, a data file of Iceberg table", symlink, file)},
		{"a hard link to the file", []string{hardlink, table}, fmt.Sprintf("the input %q is %s, a data file of Iceberg table", hardlink, file)},
		{"a symlink to its directory", []string{table, dirlink}, "reaches " + dirlink + "/"},
	} {
		for _, body := range []string{"columns: [id, key]\n", "pipeline:\n  - filter: {expr: 'key != 99'}\n  - select: [id]\n"} {
			t.Run(tc.name, func(t *testing.T) {
				dir := t.TempDir()
				var q []string
				for _, in := range tc.ins {
					q = append(q, fmt.Sprintf("%q", in))
				}
				src := fmt.Sprintf("inputs: [%s]\nbatch: {size: 64, last: keep}\nring: {dir: %q, name: t, slots: 4}\n%s", strings.Join(q, ", "), dir, body)
				if tc.want == "" {
					_, out := runRowsStats(t, src, dir)
					if n, kept := len(out["id"]), 2000-countDeleted(del); n != kept {
						t.Fatalf("%d rows; want the table's %d kept rows once", n, kept)
					}
					return
				}
				job, err := spec.Parse("test.yaml", []byte(src))
				if err != nil {
					t.Fatal(err)
				}
				// A job not refused runs until its ring, which nothing
				// reads, fills: bounded, so that a miss fails, not hangs.
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, err = engine.Run(ctx, job, engine.Options{})
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v; want one containing %q", err, tc.want)
				}
			})
		}
	}
}

func countDeleted(del func(int64) bool) int {
	n := 0
	for id := range int64(2000) {
		if del(id) {
			n++
		}
	}
	return n
}

// firstSnapshot is the id of the first snapshot in the metadata file meta.
func firstSnapshot(t *testing.T, meta string) int64 {
	t.Helper()
	data, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Snapshots []struct {
			ID int64 `json:"snapshot-id"`
		} `json:"snapshots"`
	}
	if err := json.Unmarshal(data, &m); err != nil || len(m.Snapshots) < 2 {
		t.Fatalf("metadata %s: %v (%d snapshots; want 2)", meta, err, len(m.Snapshots))
	}
	return m.Snapshots[0].ID
}
