package peer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/lastmile/lastmile/roots"
	"github.com/lastmile/lastmile/spec"
)

// TestSideTableThatIsTheUnitsFile: a job's side table that is also the
// file of the unit its compile was made for (a join of the inputs with
// one of them) is recorded and checked as any side table: the cached
// job serves the units of the other files too, and of the next runs.
// Before, the compile's unit file was left out of what it recorded (a
// unit opens its own file afresh), so that the table, loaded once, was
// never checked: a file replaced under its name was joined as it had
// been read for as long as the job stayed cached.
func TestSideTableThatIsTheUnitsFile(t *testing.T) {
	setSideRecheck(t, 0)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.parquet"), []byte("first"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := roots.New(map[string]string{"d": dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	job, err := spec.Parse("", []byte(fmt.Sprintf("version: 1\nname: self\ninputs: [d/a.parquet]\nbatch: {size: 10, last: keep}\nepochs: 1\nseed: 1\nring: {slots: 4, dir: %s}\npipeline:\n  - join: {kind: anti, table: d/a.parquet, on: k}\n", t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	fsys := rootsFS{r: r, user: Self()}
	fsys.side = newSideFiles(fsys, "d/a.parquet") // the compile of a unit of d/a.parquet
	if err := fsys.side.noteTables(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Open("d/a.parquet") // the side table's planning and load
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	s := fsys.side
	if n := s.seal(); n == 0 {
		t.Fatal("the compile recorded nothing: a job whose side table is its unit's file is never checked")
	}
	tmp := filepath.Join(dir, "a.tmp")
	if err := os.WriteFile(tmp, []byte("second, longer"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "a.parquet")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.fresh(context.Background()); err == nil {
		t.Fatal("a side table replaced under its name, the compile's unit file too, kept the job")
	}
}
