package peer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/spec"
)

// TestSideTableAlsoTheCompilesUnitFile: a side table that is also an
// input file, whose unit happened to be the one its job compiled
// against, is checked again as any side table is. The compile left the
// ticket's unit file out of what it recorded, since every unit opens its
// own file afresh; but the side table's open was that name too, so it
// went unrecorded, the job had nothing to check, and after bob's chmod
// of his table the peer went on joining it into his units of his other
// files (and a replaced table was joined as it had been read).
func TestSideTableAlsoTheCompilesUnitFile(t *testing.T) {
	setSideRecheck(t, 0)
	f, side, _, _ := sideRecheckFixture(t)
	other := filepath.Join(f.data, "part-00001.parquet")
	job, text := f.antiJoin(t, "selfside", 1, 50, side, other, side)
	var onSide, onOther *decode.Unit
	for _, u := range localPlan(t, job).Units {
		switch u.File {
		case side:
			onSide = &u
		case other:
			onOther = &u
		}
	}
	if onSide == nil || onOther == nil {
		t.Fatal("no unit of the side table's file, or none of the other input's")
	}
	ptext, err := portableJob(f.roots, text, job)
	if err != nil {
		t.Fatal(err)
	}
	bob := User{UID: bobUID, GID: bobUID}
	ticket := func(u decode.Unit) *Ticket {
		u.File, _ = f.roots.Locate(u.File)
		return &Ticket{Version: Version, Job: ptext, Hash: jobHash([]byte(ptext)), Unit: u, User: &bob}
	}
	c := &jobCache{max: 4}
	defer c.closeAll()
	ctx, log := context.Background(), slog.New(slog.DiscardHandler)
	fsys := rootsFS{r: f.roots, user: bob}
	_, done, err := c.get(ctx, log, ticket(*onSide), fsys, 1)
	if err != nil {
		t.Fatalf("bob's job, compiled against a unit of his side table: %v", err)
	}
	done()
	if err := os.Chmod(side, 0); err != nil {
		t.Fatal(err)
	}
	_, done, err = c.get(ctx, log, ticket(*onOther), fsys, 1)
	if err == nil {
		done()
		t.Fatal("after chmod 0 of bob's side table, the cached job served his unit of another file: it joined a table bob may no longer open")
	}
	if !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("after chmod 0 of bob's side table: %v, want a permission error", err)
	}
}

// TestJoinlessJobNotChecked: a job without a side table has nothing to
// check, though its compile opened its unit's file (recorded, as a side
// table's might be): its units pay no check.
func TestJoinlessJobNotChecked(t *testing.T) {
	f := newFixture(t)
	text := fmt.Sprintf("version: 1\nname: joinless\ninputs: [%s]\nbatch: {size: 10}\nring: {slots: 4, dir: %s}\npipeline:\n  - select: [row_id]\n",
		filepath.Join(f.data, "part-00001.parquet"), f.shm)
	job, err := spec.Parse("", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := decode.PlanFiles(context.Background(), job.Inputs, decode.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := plan.Units[0]
	u.File, _ = f.roots.Locate(u.File)
	tk := &Ticket{Version: Version, Job: text, Hash: jobHash([]byte(text)), Unit: u, User: &User{}}
	c := &jobCache{max: 4}
	defer c.closeAll()
	j, done, err := c.get(context.Background(), slog.New(slog.DiscardHandler), tk, rootsFS{r: f.roots, user: Self()}, 1)
	if err != nil {
		t.Fatal(err)
	}
	done()
	if j.files != nil {
		t.Fatalf("a job without a side table is checked: %v", j.files.files)
	}
}
